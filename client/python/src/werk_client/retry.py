"""When and how long to wait before retrying a request that failed transiently.

A job server is usually restarted or failed over while producers keep pushing; a short blip
must not surface as an exception in application code. Retries use capped exponential backoff
with full jitter so that many clients reconnecting at once do not stampede the server.

Only failures where retrying cannot do harm are retried: the request never reached the server
(connection refused, connect timeout), or the server/proxy said it did not process it (502, 503,
504). A lost answer (read error after sending) is retried only for requests that are safe to
repeat; every request the SDK sends is, except ``fetch`` (a repeated fetch would lease more
jobs while the first batch waits out its reservation).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .transport import ConnectError, TransportError

__all__ = ["RetryPolicy"]

TRANSIENT_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Capped exponential backoff with full jitter.

    ``attempts`` counts every try, the first included (1 disables retries). The n-th retry waits
    a random time in ``[0, min(cap, base * 2**n)]``; a server ``Retry-After`` raises that floor
    (still capped).
    """

    attempts: int = 5
    base: float = 0.1
    cap: float = 5.0

    def delay(self, retry_number: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry_number`` (0-based)."""
        ceiling = min(self.cap, self.base * (2**retry_number))
        wait = random.uniform(0, ceiling)
        if retry_after is not None:
            wait = max(wait, min(self.cap, retry_after))
        return wait

    @staticmethod
    def should_retry_exception(exc: Exception, *, idempotent: bool) -> bool:
        """Transport failures: retry if the request surely was not sent, or it may be repeated."""
        if isinstance(exc, ConnectError):
            return True
        return idempotent and isinstance(exc, TransportError)

    @staticmethod
    def should_retry_status(status: int) -> bool:
        return status in TRANSIENT_STATUSES


NO_RETRY = RetryPolicy(attempts=1)
