"""A small pool of daemon threads for plain (non-async) handlers.

``concurrent.futures.ThreadPoolExecutor`` joins its threads at interpreter exit, so one hung
handler would keep a worker that was told to terminate alive forever. Here the threads are
daemons: once the worker has failed the unfinished jobs on the server (so they retry), the
process can exit without waiting for code it cannot interrupt.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

__all__ = ["DaemonThreadPool", "LoopHandoff"]

# What a thread does with a call's outcome: (result, exception); False = it was cancelled.
_Finish = Callable[[Any, BaseException | None], None]
_Item = tuple[Callable[[], bool], Callable[[], Any], _Finish]


def _always() -> bool:
    return True


class LoopHandoff:
    """Outcomes of calls run on threads, handed to futures of one event loop.

    Waking the loop costs a write to its self-pipe; outcomes that arrive while a hand-off is
    already scheduled go with it, so under load many jobs' outcomes share one wake-up.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._done: deque[tuple[asyncio.Future[Any], Any, BaseException | None]] = deque()
        self._lock = threading.Lock()
        self._scheduled = False

    def finisher(self, future: asyncio.Future[Any]) -> _Finish:
        def finish(result: Any, exc: BaseException | None) -> None:
            self._done.append((future, result, exc))
            with self._lock:
                if self._scheduled:
                    return
                self._scheduled = True
            # A closed loop: nobody waits for the outcome any more.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._drain)

        return finish

    def _drain(self) -> None:
        with self._lock:
            self._scheduled = False
        done = self._done
        while done:
            future, result, exc = done.popleft()
            if future.done():
                continue
            if exc is not None:
                future.set_exception(exc)
            else:
                future.set_result(result)


class DaemonThreadPool:
    """Runs callables on up to ``max_workers`` daemon threads, started on demand."""

    def __init__(self, max_workers: int, name: str = "werk-handler") -> None:
        self._max_workers = max(1, max_workers)
        self._name = name
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()

        def finish(result: Any, exc: BaseException | None) -> None:
            if exc is not None:
                future.set_exception(exc)
            else:
                future.set_result(result)

        self._put((future.set_running_or_notify_cancel, fn, finish))
        return future

    def run_for(
        self, fn: Callable[[], Any], future: asyncio.Future[Any], handoff: LoopHandoff
    ) -> None:
        """Run ``fn`` on a thread; its outcome completes ``future`` (through ``handoff``)."""
        self._put((_always, fn, handoff.finisher(future)))

    def _put(self, item: _Item) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("pool is shut down")
            self._queue.put(item)
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._max_workers:
                thread = threading.Thread(
                    target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def grow(self, extra: int = 1) -> None:
        """Allow ``extra`` more threads: one was given up on (its job was taken away) but
        cannot be stopped, and must not hold a slot that a new job needs."""
        with self._lock:
            self._max_workers += extra

    def shutdown(self) -> None:
        """Stop idle threads; busy ones finish their item (or die with the process)."""
        with self._lock:
            self._closed = True
            for _ in self._threads:
                self._queue.put(None)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            start, fn, finish = item
            if start():
                try:
                    result = fn()
                except BaseException as exc:
                    finish(None, exc)
                else:
                    finish(result, None)
            del item, start, fn, finish
            self._idle.release()
