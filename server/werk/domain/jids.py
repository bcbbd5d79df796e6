"""The jids the server makes for jobs pushed without one.

They are ordered by time: the Unix time in milliseconds above a 68-bit random number, as 28 hex
digits (11 of time, 17 of randomness). A random key lands anywhere in the job table's primary
key, so every push dirties a leaf page of its own; keys that grow put a batch's entries side by
side at the index's right edge. Within one batch the number counts up from one random start (a
carry out of the random part only moves into the next millisecond), so the jids of a batch
cannot collide; jids of different calls would have to share the millisecond and overlap in a
68-bit range. 28 characters take the same 32 bytes in an index entry as the 24 random ones did.
The price is paid under churn: random keys reuse the room VACUUM frees anywhere in the index,
growing ones only once whole pages have been emptied and recycled, which is one reason the server
VACUUMs the job table often (``WERK_VACUUM_INTERVAL``). The clock here only
orders keys (a clock set back costs locality, never correctness), so it is the system's and not
the injected one."""

from __future__ import annotations

import secrets
import time

_RANDOM_BITS = 68


def new_jids(n: int) -> list[str]:
    start = (time.time_ns() // 1_000_000) << _RANDOM_BITS | secrets.randbits(_RANDOM_BITS)
    return ["%028x" % v for v in range(start, start + n)]  # noqa: UP031 (cheaper than an f-string)


def new_jid() -> str:
    return new_jids(1)[0]
