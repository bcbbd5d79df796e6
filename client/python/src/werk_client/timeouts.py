"""Per-job execution timeouts: how long one attempt's handler may run on a worker.

A timeout is the worker's own limit, separate from the server's ``reserve_for`` (how long a
lease lasts between extensions). The worker extends the lease of a running job, so a hung
handler would otherwise keep its job forever. At the timeout the handler is asked to stop
(its task cancelled, ``job.timed_out`` set, or SIGTERM in process mode); after ``timeout_grace``
more seconds the attempt is failed with errtype ``Timeout`` whatever the handler does, and its
slot serves the next job.

A timeout comes from the handler's registration or, per job, from ``custom.timeout`` (seconds),
which wins. A timeout the job's reservation cannot cover is refused where it is set: a lease
that expires before the handler is even asked to stop would hand the job to another worker
while this one still runs it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["RESERVE_FOR_DEFAULT", "RESERVE_FOR_MAX", "TIMEOUT_ERRTYPE", "check_timeout"]

TIMEOUT_ERRTYPE = "Timeout"
RESERVE_FOR_DEFAULT = 1800  # the server's default reservation
RESERVE_FOR_MAX = 86_400  # the longest reservation the server accepts


def check_timeout(timeout: Any, reserve_for: int | None, *, where: str) -> float:
    """``timeout`` as seconds; ``ValueError`` unless it is positive and within ``reserve_for``
    (the server's default when None)."""
    cover = RESERVE_FOR_DEFAULT if reserve_for is None else reserve_for
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise ValueError(f"{where}: timeout must be a positive number of seconds, not {timeout!r}")
    if timeout > cover:
        raise ValueError(
            f"{where}: timeout {timeout:g}s is longer than the job's reserve_for ({cover}s), "
            "which must cover it; raise reserve_for or lower the timeout"
        )
    return float(timeout)


def custom_timeout(custom: Mapping[str, Any] | None) -> Any:
    """The per-job timeout in ``custom`` (None: not set)."""
    if not custom:
        return None
    return custom.get("timeout")
