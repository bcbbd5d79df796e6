"""The jids the client mints for the jobs it pushes.

A job's jid is minted before the first attempt so that a push retried after a lost answer names
the same job, and the server stores it once. Its form is the one the server gives jobs pushed
without one: the Unix time in milliseconds above a 68-bit number, as 28 hex digits. Keys that
grow put a push's entries side by side at the right edge of the job table's primary key, where
random ones (uuid4) would each land on a leaf page of their own and dirty it, so a batch of
client-minted jids cost the server more than the same batch without jids.

Within a process the jids only grow: the first jid of a millisecond takes a random 68-bit start,
the others of that millisecond count up from it (a clock set back keeps the count going). So
two processes' jids collide only if they share the millisecond and overlap in a 68-bit range,
as two batches pushed without jids do on the server. A forked child starts afresh, or parent
and child would continue the same count.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["new_jid"]

_RANDOM_BITS = 68


class _Minted:
    __slots__ = ("last", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last = 0


_minted = _Minted()


def _fork_child() -> None:
    global _minted
    _minted = _Minted()


os.register_at_fork(after_in_child=_fork_child)


def new_jid() -> str:
    """A fresh job id: 28 hex digits, later ones higher (see the module's docstring)."""
    ms = time.time_ns() // 1_000_000
    minted = _minted
    with minted.lock:
        last = minted.last
        if last >> _RANDOM_BITS < ms:
            value = ms << _RANDOM_BITS | int.from_bytes(os.urandom(9)) >> (72 - _RANDOM_BITS)
        else:
            value = last + 1
        minted.last = value
    return f"{value:028x}"
