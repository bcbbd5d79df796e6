"""Worker settings, with defaults fit for production and environment overrides for tests/ops.

Every timing is configurable because the right values differ by orders of magnitude between a
production worker (beat every 15 s, 25 s long polls) and a test that must finish in seconds.
Environment variables (``WERK_BEAT_INTERVAL`` ...) apply when a field is not given explicitly.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["WorkerConfig", "weighted_order"]


def weighted_order(queues: Sequence[str], weights: Mapping[str, int]) -> list[str]:
    """``queues`` drawn one by one without replacement, each with probability proportional to
    its weight (key ``u ** (1 / w)``, largest first: Efraimidis and Spirakis)."""
    keys = {q: random.random() ** (1 / weights.get(q, 1)) for q in queues}
    return sorted(queues, key=keys.__getitem__, reverse=True)


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


_ENV: dict[str, tuple[str, Any]] = {
    "queues": ("WERK_QUEUES", _split),
    "concurrency": ("WERK_CONCURRENCY", int),
    "fetch_wait": ("WERK_FETCH_WAIT", float),
    "fetch_size": ("WERK_FETCH_SIZE", int),
    "beat_interval": ("WERK_BEAT_INTERVAL", float),
    "extend_fraction": ("WERK_EXTEND_FRACTION", float),
    "grace": ("WERK_GRACE", float),
    "backtrace_lines": ("WERK_BACKTRACE_LINES", int),
    "labels": ("WERK_LABELS", _split),
    "timeout_grace": ("WERK_TIMEOUT_GRACE", float),
}


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """How a ``Worker`` fetches, beats, extends leases and shuts down.

    * ``queues``: fetched in this order (earlier queues first), unless ``weights`` are given.
    * ``weights``: ``{"critical": 6, "default": 3, "low": 1}``: every fetch orders the queues
      by a weighted random draw (as Sidekiq does), so no queue starves; queues with no weight
      given weigh 1; every weighted queue must be in ``queues``. Empty: the strict order.
    * ``concurrency``: jobs running at once; fetches ask for at most the free capacity.
    * ``process``: run every job in its own child process (crash isolation).
    * ``fetch_wait``: long-poll duration of one fetch (server caps it at 30 s).
    * ``fetch_size``: most jobs asked for per fetch (1 disables batched fetching).
    * ``beat_interval``: seconds between heartbeats.
    * ``extend_fraction``: extend each lease after this fraction of ``reserve_for`` has passed
      (must be < 0.5 so the lease never reaches half-spent).
    * ``grace``: after SIGTERM/SIGINT, how long running jobs may finish before being failed.
    * ``backtrace_lines``: most backtrace lines sent with a failure.
    * ``batch_ack``: acknowledge completed jobs together (one request per batch).
    * ``timeout_grace``: after a job's timeout, how long its handler may take to stop before
      the attempt is failed anyway (and a child process killed).
    * ``shutdown_retry_in``: retry delay asked for jobs failed at shutdown (0 = right away),
      since they were interrupted rather than broken.
    """

    queues: tuple[str, ...] = ("default",)
    concurrency: int = 10
    process: bool = False
    fetch_wait: float = 25.0
    fetch_size: int = 100
    beat_interval: float = 15.0
    extend_fraction: float = 1 / 3
    grace: float = 25.0
    backtrace_lines: int = 30
    labels: tuple[str, ...] = field(default_factory=tuple)
    batch_ack: bool = True
    shutdown_retry_in: float = 0.0
    timeout_grace: float = 5.0
    weights: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.queues:
            raise ValueError("at least one queue is required")
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if not 0 < self.extend_fraction < 0.5:
            raise ValueError("extend_fraction must be between 0 and 0.5 (exclusive)")
        if not 0 <= self.fetch_wait <= 30:
            raise ValueError("fetch_wait must be between 0 and 30 seconds")
        if not 1 <= self.fetch_size <= 100:
            raise ValueError("fetch_size must be between 1 and 100")
        if self.beat_interval <= 0:
            raise ValueError("beat_interval must be > 0")
        if self.grace < 0:
            raise ValueError("grace must be >= 0")
        if self.timeout_grace < 0:
            raise ValueError("timeout_grace must be >= 0")
        if any(weight < 1 for weight in self.weights.values()):
            raise ValueError("queue weights must be >= 1")
        unknown = set(self.weights) - set(self.queues)
        if unknown:
            raise ValueError(f"weights name queues not in queues: {', '.join(sorted(unknown))}")

    def queue_order(self) -> list[str]:
        """The queues in the order of the next fetch: strict, or a weighted random draw."""
        if not self.weights:
            return list(self.queues)
        return weighted_order(self.queues, self.weights)

    @classmethod
    def from_env(cls, **overrides: Any) -> WorkerConfig:
        """Defaults, then ``WERK_*`` environment variables, then explicit ``overrides``."""
        known = {f.name for f in fields(cls)}
        unknown = set(overrides) - known
        if unknown:
            raise TypeError(f"unknown worker option(s): {', '.join(sorted(unknown))}")
        values: dict[str, Any] = {}
        for name, (var, convert) in _ENV.items():
            raw = os.environ.get(var)
            if raw:
                values[name] = convert(raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        if "weights" in values:
            values["weights"] = dict(values["weights"])
        if isinstance(values.get("queues"), str):
            values["queues"] = _split(values["queues"])
        for name in ("queues", "labels"):
            if name in values:
                values[name] = tuple(values[name])
        if any(":" in queue for queue in values.get("queues", ())):
            # "critical:6,default:3" (WERK_QUEUES, --queues): weighted queues.
            pairs = [(*queue.split(":", 1), "1")[:2] for queue in values["queues"]]
            values["queues"] = tuple(name for name, _ in pairs)
            values["weights"] = {name: int(weight) for name, weight in pairs}
        return cls(**values)
