"""A small pool of daemon threads for plain (non-async) handlers.

``concurrent.futures.ThreadPoolExecutor`` joins its threads at interpreter exit, so one hung
handler would keep a worker that was told to terminate alive forever. Here the threads are
daemons: once the worker has failed the unfinished jobs on the server (so they retry), the
process can exit without waiting for code it cannot interrupt.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

__all__ = ["DaemonThreadPool"]

_Item = tuple["Future[Any]", Callable[[], Any]]


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
        with self._lock:
            if self._closed:
                raise RuntimeError("pool is shut down")
            self._queue.put((future, fn))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._max_workers:
                thread = threading.Thread(
                    target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        return future

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
            future, fn = item
            if future.set_running_or_notify_cancel():
                try:
                    result = fn()
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del item, future, fn
            self._idle.release()
