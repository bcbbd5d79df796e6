"""The jids the client mints for the jobs it pushes.

A job's jid is minted before the first attempt so that a push retried after a lost answer names
the same job, and the server stores it once. Its form is the one the server gives jobs pushed
without one: the Unix time in milliseconds above a 68-bit number, as 28 hex digits. Keys that
grow put a push's entries side by side at the right edge of the job table's primary key, where
random ones (uuid4) would each land on a leaf page of their own and dirty it, so a batch of
client-minted jids cost the server more than the same batch without jids.

Each process takes a random 68-bit start and counts up from it, under whatever millisecond it
is. So no two jids of a process are the same, its threads' included, and jids minted one after
another grow unless the clock is set back. Two processes' jids collide only if they share the
millisecond and the point of their counts, as two batches pushed without jids do on the
server. A forked child takes a start of its own, or parent and child would count on alike.
"""

from __future__ import annotations

import itertools
import os
import time

__all__ = ["new_jid"]

_RANDOM_BITS = 68
_RANDOM_MASK = (1 << _RANDOM_BITS) - 1


class _Count:
    __slots__ = ("next", "start")

    def __init__(self) -> None:
        self.start = int.from_bytes(os.urandom(9)) >> (72 - _RANDOM_BITS)
        # A count's next() is one step under the GIL: threads take distinct numbers, no lock.
        self.next = itertools.count(self.start).__next__


_count = _Count()


def _fork_child() -> None:
    global _count
    _count = _Count()


os.register_at_fork(after_in_child=_fork_child)


def new_jid() -> str:
    """A fresh job id: 28 hex digits, later ones higher (see the module's docstring)."""
    value = (time.time_ns() // 1_000_000) << _RANDOM_BITS | _count.next() & _RANDOM_MASK
    return value.to_bytes(14).hex()
