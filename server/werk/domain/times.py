"""The instants Werk accepts and stores: those whose UTC value Python's datetime can hold.

PostgreSQL keeps times far outside that range (BC dates, year 10000 and later, 'infinity'), but
the server reads every stored time back into a datetime and clients in other languages parse the
same text, so a time beyond these bounds would be stored and then be unreadable. Every path that
takes a time from a client refuses one outside them, and every time Werk computes is capped at
``TIME_MAX``."""

from __future__ import annotations

from datetime import UTC, datetime

TIME_MIN = datetime.min.replace(tzinfo=UTC)  # 0001-01-01T00:00:00Z
TIME_MAX = datetime.max.replace(tzinfo=UTC)  # 9999-12-31T23:59:59.999999Z
OUT_OF_RANGE = "must lie between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z (in UTC)"


def check_time(value: datetime) -> datetime:
    """``value`` (aware) in UTC, or ValueError when its UTC value lies outside the bounds
    (e.g. 0001-01-01T00:00:00+14:00, which is in 1 BC). In UTC because PostgreSQL refuses
    offsets beyond 15:59 that Python accepts."""
    # Aware datetimes compare by their UTC value, without converting (which could overflow).
    if not TIME_MIN <= value <= TIME_MAX:
        raise ValueError(f"time {value.isoformat()} is out of range: it {OUT_OF_RANGE}")
    return value.astimezone(UTC)
