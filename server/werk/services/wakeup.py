"""Wakes long-polling fetches when jobs arrive, without a database connection per waiting request.

Three paths, from fastest to safest:
1. a push handled by this process wakes local waiters in memory; a due job pushed while a fetch
   waits on its queue is even stored reserved for that fetch (``take``), which the push's commit
   then answers without a claim of its own;
2. other processes hear about it through ONE listening connection per process (NOTIFY, coalesced
   while a previous NOTIFY is in flight). A process that finds no other Werk process listening
   sends none: on one node a NOTIFY was almost a third of a lone push's server work. A process
   whose LISTEN starts announces itself (an empty NOTIFY), so the others start sending at once;
   who is listening is also re-read each interval, which notices the ones that left;
3. a periodic re-check (one query per interval for all waiters) so a lost notification costs
   latency, never a job. A process without a LISTEN of its own (``without_listen``: behind a
   transaction pooler, which cannot keep one) relies on it for other nodes' jobs.
Waiters are woken one per pushed job (not all at once) and pass the wake-up on when they take a
full batch, so a thousand idle fetchers do not stampede on each push.

Requests waiting for a job's result are woken the same three ways: by a settlement in this process,
by a notification from the process that settled it (the jids after a ``#``), and by the re-check.
Every settlement is told to the other nodes (acked and kept, failed or orphaned to dead or
discarded, killed, cancelled, deleted, expired, cleared, flushed) but one: a job deleted at its
ack, the hot path, whose result nobody can read (a waiter elsewhere learns of it at the re-check).
A flush of every job is told as ``#*`` (no jid starts with ``*``): every result waiter looks again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections import OrderedDict, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

log = logging.getLogger(__name__)


class Waiter:
    """A long-polling fetch: worker ``wid`` wants up to ``count`` jobs from ``queues``.

    Its wait ends when ``answer`` resolves: with None (look again: woken, timed out, closed,
    client gone) or, once a push has taken it, with the jobs that push stored reserved for it.
    The fetch awaits this one future, so a push's commit reaches it in one turn of the loop."""

    __slots__ = ("answer", "count", "queues", "taken", "waiting", "wid")

    def __init__(self, queues: Sequence[str], wid: str, count: int) -> None:
        self.queues = tuple(queues)
        self.wid = wid
        self.count = count
        self.answer: asyncio.Future[list[Any] | None] = asyncio.get_running_loop().create_future()
        self.waiting = False  # in wait(), not claiming
        self.taken = False  # a push will answer with the jobs it stored for this fetch

    def wake(self, *_: object) -> None:
        """End the wait with nothing handed over, unless a push has taken this fetch (then only
        that push answers, so the jobs it reserves are never dropped)."""
        if not self.taken and not self.answer.done():
            self.answer.set_result(None)

    def hand_over(self, jobs: list[Any]) -> bool:
        """The taking push's answer: the jobs stored reserved for this fetch ([]: look again).
        False when the fetch was cancelled meanwhile: nobody will deliver the jobs."""
        if self.answer.done():
            return False
        self.answer.set_result(jobs)
        return True


class WakeHub:
    def __init__(
        self,
        *,
        send_notify: Callable[[str], Awaitable[None]],
        queues_with_jobs: Callable[[Sequence[str]], Awaitable[list[str]]],
        count_peers: Callable[[int], Awaitable[int]],
        poll_interval: float,
        jobs_settled: Callable[[Sequence[str]], Awaitable[list[str]]] | None = None,
    ) -> None:
        """``count_peers(pid)``: how many Werk LISTEN connections other than backend ``pid``
        (this process's own) the database has. ``jobs_settled(jids)``: those of the jids whose
        job is settled or no longer stored (the re-check of result waiters)."""
        self._send_notify = send_notify
        self._queues_with_jobs = queues_with_jobs
        self._count_peers = count_peers
        self._poll_interval = poll_interval
        self._node = secrets.token_hex(6)
        # Notifications go out unless this process knows nobody else listens: that takes its
        # own LISTEN being up (backend pid known) and a count of the others that no
        # announcement (``_announced``) has overtaken since it was asked for.
        self._listen_pid: int | None = None
        self._alone = False
        self._announced = 0
        self._recount = asyncio.Event()
        # queue -> waiters in arrival order (dict used as an ordered set)
        self._waiters: defaultdict[str, OrderedDict[Waiter, None]] = defaultdict(OrderedDict)
        self._outgoing: dict[str, int] = {}
        self._outgoing_ready = asyncio.Event()
        self._jobs_settled = jobs_settled
        # jid -> the wake-ups of the requests waiting for its result
        self._result_waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._outgoing_results: set[str] = set()
        self._outgoing_all_settled = False
        self._closed = False
        self._tasks: list[asyncio.Task[None]] = []

    # -- waiting ---------------------------------------------------------------------------

    def register(self, queues: Sequence[str], wid: str, count: int) -> Waiter:
        waiter = Waiter(queues, wid, count)
        for q in waiter.queues:
            self._waiters[q][waiter] = None
        return waiter

    def unregister(self, waiter: Waiter) -> None:
        for q in waiter.queues:
            waiting = self._waiters.get(q)
            if waiting is not None:
                waiting.pop(waiter, None)
                if not waiting:
                    del self._waiters[q]

    async def wait(
        self, waiter: Waiter, seconds: float, gone: asyncio.Future[None] | None
    ) -> list[Any] | None:
        """Returns the jobs a push stored reserved for this fetch, or None (look again) when
        woken, when ``seconds`` pass, when the hub closes, or when ``gone`` completes (the
        fetch's client left). A taken fetch always waits for its push's answer."""
        if self._closed:
            return None
        timer = asyncio.get_running_loop().call_later(seconds, waiter.wake)
        if gone is not None:
            gone.add_done_callback(waiter.wake)
        waiter.waiting = True
        try:
            # Awaited directly (not shielded: that costs the answer a turn of the loop, and the
            # push's own reply would go out first). A cancelled fetch cancels its answer; the
            # push then sees hand_over refused and hands the jobs back.
            return await waiter.answer
        finally:
            waiter.waiting = False
            timer.cancel()
            if gone is not None:
                gone.remove_done_callback(waiter.wake)

    def take(self, queue: str) -> Waiter | None:
        """The oldest fetch waiting on ``queue``, taken out of the hub so a push can store jobs
        already reserved for it. The taker must answer it (``hand_over``: with those jobs, or
        with [] to send the fetch looking again)."""
        waiting = self._waiters.get(queue)
        if not waiting or self._closed:
            return None
        waiter = next((w for w in waiting if w.waiting and not w.answer.done()), None)
        if waiter is not None:
            self.unregister(waiter)
            waiter.taken = True
        return waiter

    @property
    def closed(self) -> bool:
        return self._closed

    # -- waiting for results ---------------------------------------------------------------

    def watch_result(self, jid: str) -> asyncio.Future[None]:
        """A future that completes when job ``jid`` may have settled (look again); registered
        before the caller reads the job, so a settlement between the read and the wait still
        wakes it. Give it back with ``unwatch_result``."""
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._closed:
            woken.set_result(None)
        self._result_waiters.setdefault(jid, []).append(woken)
        return woken

    def unwatch_result(self, jid: str, woken: asyncio.Future[None]) -> None:
        waiting = self._result_waiters.get(jid)
        if waiting is not None:
            with contextlib.suppress(ValueError):
                waiting.remove(woken)
            if not waiting:
                del self._result_waiters[jid]

    @property
    def waiting_for_results(self) -> bool:
        """True while a request in this process waits for a job's result."""
        return bool(self._result_waiters)

    def jobs_settled(self, jids: Iterable[str], *, readable: Iterable[str] = ()) -> None:
        """Jobs left their unsettled states here: wake the requests in this process waiting for
        their results, and tell the other nodes (if any listen) about the ``readable`` ones:
        every settlement but the jobs deleted at ack (``jids``), whose results nobody reads."""
        if self._result_waiters:
            for jid in jids:
                self._wake_result(jid)
            for jid in readable:
                self._wake_result(jid)
        if self._alone:
            return
        before = len(self._outgoing_results)
        self._outgoing_results.update(readable)
        if len(self._outgoing_results) > before:
            self._outgoing_ready.set()

    def all_settled(self) -> None:
        """Every job is gone (a flush): wake every request waiting for a result, here and on the
        other nodes (if any listen), instead of naming jobs nobody may be waiting for."""
        self._wake_all_results()
        if self._alone:
            return
        self._outgoing_all_settled = True
        self._outgoing_ready.set()

    def _wake_all_results(self) -> None:
        for jid in list(self._result_waiters):
            self._wake_result(jid)

    def _wake_result(self, jid: str) -> None:
        for woken in self._result_waiters.pop(jid, ()):
            if not woken.done():
                woken.set_result(None)

    # -- waking ----------------------------------------------------------------------------

    def wake(self, queue: str, count: int) -> None:
        """Wake up to ``count`` waiters of ``queue`` (oldest first)."""
        waiting = self._waiters.get(queue)
        if not waiting:
            return
        for waiter in list(waiting)[:count]:
            waiter.wake()
            self.unregister(waiter)

    def jobs_arrived(self, counts: dict[str, int]) -> None:
        """Jobs became available here: wake local waiters now, tell the other nodes soon (if
        any listen)."""
        for queue, n in counts.items():
            self.wake(queue, n)
        if self._alone or not counts:
            return
        for queue, n in counts.items():
            self._outgoing[queue] = self._outgoing.get(queue, 0) + n
        self._outgoing_ready.set()

    @property
    def hello(self) -> str:
        """The notification that announces this process's LISTEN to the others."""
        return f"{self._node}|"

    @property
    def alone(self) -> bool:
        """True while no other process listens, as far as this one knows (it sends nothing)."""
        return self._alone

    def listening(self, pid: int | None) -> None:
        """This process's LISTEN connection is up (its backend ``pid``, hello sent) or lost
        (None: it hears no announcements, so it notifies until it listens and counts again)."""
        self._listen_pid = pid
        self._alone = False
        if pid is not None:
            self._recount.set()

    def without_listen(self) -> None:
        """This process will not LISTEN (behind a transaction pooler, with no direct connection
        given): its long polls hear of other nodes' jobs at the re-check. It still counts the
        processes that do listen (all of them: no backend has pid 0), and notifies only while
        there are some; one that starts is noticed at the next count, as it announces itself
        on a channel this process does not hear."""
        self.listening(0)

    def on_notification(self, payload: str) -> None:
        node, _, body = payload.partition("|")
        if node == self._node:
            return
        if not body:  # another process started listening
            self._announced += 1
            self._alone = False
            return
        if body[0] == "#":  # jobs settled: their results are readable
            if body == _ALL_SETTLED:
                self._wake_all_results()
            elif self._result_waiters:
                for jid in body[1:].split(","):
                    self._wake_result(jid)
            return
        for item in body.split(","):
            queue, _, n = item.rpartition(":")
            with contextlib.suppress(ValueError):
                self.wake(queue, int(n))

    # -- background ------------------------------------------------------------------------

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._send_loop(), name="werk-notify-send"),
            asyncio.create_task(self._recheck_loop(), name="werk-wake-recheck"),
            asyncio.create_task(self._peers_loop(), name="werk-wake-peers"),
        ]

    def stop_waiting(self) -> None:
        """Shutdown has begun: every waiting fetch answers now, with no jobs."""
        self._closed = True
        for waiting in list(self._waiters.values()):
            for waiter in list(waiting):
                waiter.wake()
        self._wake_all_results()

    async def close(self) -> None:
        self.stop_waiting()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _send_loop(self) -> None:
        while True:
            await self._outgoing_ready.wait()
            self._outgoing_ready.clear()
            outgoing, self._outgoing = self._outgoing, {}
            settled, self._outgoing_results = self._outgoing_results, set()
            all_settled, self._outgoing_all_settled = self._outgoing_all_settled, False
            if self._alone:
                continue
            payloads = [f"{self._node}|#{body}" for body in _chunks(settled)]
            if all_settled:
                payloads.append(f"{self._node}|{_ALL_SETTLED}")
            if outgoing:
                payloads.append(
                    f"{self._node}|" + ",".join(f"{q}:{n}" for q, n in outgoing.items())
                )
            try:
                for payload in payloads:
                    await self._send_notify(payload)
            except Exception as exc:  # the re-check loop covers what is lost here
                log.debug("notify failed: %s", exc)
                await asyncio.sleep(self._poll_interval)

    async def _peers_loop(self) -> None:
        while True:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns normally when it is
            # cancelled just as the event is set, and close() would then wait for this forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._poll_interval):
                    await self._recount.wait()
            self._recount.clear()
            pid, announced = self._listen_pid, self._announced
            if pid is None:
                continue
            try:
                peers = await self._count_peers(pid)
            except Exception as exc:
                log.debug("counting the listening nodes failed: %s", exc)
                peers = -1  # unknown: keep notifying
            if (pid, announced) == (self._listen_pid, self._announced):
                self._alone = peers == 0

    async def _recheck_loop(self) -> None:
        while True:
            await asyncio.sleep(self._poll_interval)
            if self._result_waiters and self._jobs_settled is not None:
                try:
                    for jid in await self._jobs_settled(list(self._result_waiters)):
                        self._wake_result(jid)
                except Exception as exc:
                    log.debug("result re-check failed: %s", exc)
            if not self._waiters:
                continue
            try:
                ready = await self._queues_with_jobs(list(self._waiters))
            except Exception as exc:
                log.debug("long-poll re-check failed: %s", exc)
                continue
            for queue in ready:
                self.wake(queue, len(self._waiters.get(queue, ())))


# The settlement of every job: a jid list no jid can be part of (a jid starts with a letter or
# a digit).
_ALL_SETTLED = "#*"

# A notification's payload is at most 8000 bytes; a jid at most 100 characters of ASCII.
_NOTIFY_JIDS_BYTES = 7000


def _chunks(jids: Iterable[str]) -> list[str]:
    """The jids comma-separated, in pieces that fit a notification."""
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for jid in jids:
        if size + len(jid) + 1 > _NOTIFY_JIDS_BYTES and current:
            pieces.append(",".join(current))
            current, size = [], 0
        current.append(jid)
        size += len(jid) + 1
    if current:
        pieces.append(",".join(current))
    return pieces


def counts_by_queue(queues: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for q in queues:
        counts[q] = counts.get(q, 0) + 1
    return counts
