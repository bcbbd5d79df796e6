"""The no-op handlers the `sdk` scenario's werk-worker runs (BENCH_SDK_HANDLER: sync or async).
Kept apart from bench.sdk so the worker imports nothing of the harness."""

from __future__ import annotations

import os

from werk_client import Registry

registry = Registry()


async def _async_noop(*args: object) -> None:
    """No work: what is measured is the runtime (fetch, dispatch, ack) alone."""


def _sync_noop(*args: object) -> None:
    """No work, run on the worker's thread pool (the hand-off is measured too)."""


registry.register(
    "noop", _sync_noop if os.environ.get("BENCH_SDK_HANDLER") == "sync" else _async_noop
)
