"""Time is passed in. Production uses the database's clock (None tells SQL to use ``now()``), so
skew between nodes cannot expire a job early; tests use a clock they can move."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime | None:
        """The time to use, or None for the database's own ``now()``."""


class DatabaseClock:
    def now(self) -> datetime | None:
        return None


class ManualClock:
    """A clock that stands still until moved; for tests."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime.now(UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
