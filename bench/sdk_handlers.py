"""The handlers the `sdk` scenario's werk-worker runs. Kept apart from bench.sdk so the worker
imports nothing of the harness.

``noop``: no work (BENCH_SDK_HANDLER=sync runs it on the worker's thread pool, else as an
``async def``), so what is measured is the runtime alone: fetch, dispatch, ack.
``started``: its first argument is the ``time.monotonic()`` at which the producer sent the push
(the same clock in every process of the machine); it appends the delay to the handler's start
to the file named by BENCH_SDK_LATENCY_FILE.
"""

from __future__ import annotations

import os
import time

from werk_client import Registry

registry = Registry()


async def _async_noop(*args: object) -> None:
    """No work."""


def _sync_noop(*args: object) -> None:
    """No work, run on the worker's thread pool (the hand-off is measured too)."""


registry.register(
    "noop", _sync_noop if os.environ.get("BENCH_SDK_HANDLER") == "sync" else _async_noop
)

_latency_path = os.environ.get("BENCH_SDK_LATENCY_FILE")
_latency_file = open(_latency_path, "a", buffering=1) if _latency_path else None  # noqa: SIM115


@registry.handler("started")
async def _started(sent: float, *args: object) -> None:
    delay = time.monotonic() - sent
    if _latency_file is not None:
        _latency_file.write(f"{delay}\n")
