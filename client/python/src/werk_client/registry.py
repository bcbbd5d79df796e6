"""Which function handles which jobtype, and how it wants to be called.

A ``Registry`` is a plain, importable object: ``werk-worker myapp.jobs`` imports the module and
uses its registry, so the same module serves producers (which only push by name) and workers.

Calling convention, chosen so handlers stay plain functions that are easy to unit-test:

* ``def send_email(to, subject)`` is called as ``send_email(*job.args)``;
* ``def resize(path, *, job)`` (a keyword-only parameter named ``job``) also receives the
  ``Job`` context, for checkpoints, the attempt number or the jid;
* ``@registry.handler("x", with_job=True) def x(job)`` receives only the ``Job`` and reads
  ``job.args`` itself.

``async def`` handlers run on the worker's event loop; plain ``def`` handlers run in threads.
``timeout=`` limits how long one attempt may run (see ``timeouts``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .timeouts import RESERVE_FOR_MAX, check_timeout

if TYPE_CHECKING:
    from .job import Job

__all__ = ["Handler", "Hook", "Middleware", "Registry"]

F = TypeVar("F", bound=Callable[..., Any])

CallStyle = Literal["args", "args_and_job", "job"]

Hook = Callable[[], Any]
"""A function (plain or ``async``) without arguments, run when a worker starts or stops."""

Middleware = Callable[["Job", Callable[[], Awaitable[None]]], Awaitable[None]]
"""``async def mw(job, call_next)``: runs around every job; must ``await call_next()`` to run it.

Raising fails the job; not calling ``call_next`` skips the handler (the job is acked).
"""


def _is_async(func: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(func):
        return True
    call = getattr(func, "__call__", None)  # noqa: B004 - objects with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _takes_job_keyword(func: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    param = params.get("job")
    return param is not None and param.kind is inspect.Parameter.KEYWORD_ONLY


@dataclass(frozen=True, slots=True)
class Handler:
    """A registered handler: the function, whether it is async, and how it is called."""

    jobtype: str
    func: Callable[..., Any]
    style: CallStyle
    is_async: bool
    timeout: float | None = None

    @classmethod
    def create(
        cls,
        jobtype: str,
        func: Callable[..., Any],
        *,
        with_job: bool = False,
        timeout: float | None = None,
    ) -> Handler:
        if not callable(func):
            raise TypeError(f"handler for {jobtype!r} is not callable: {func!r}")
        if timeout is not None:
            # No job's reservation can cover more than the longest one the server accepts.
            timeout = check_timeout(timeout, RESERVE_FOR_MAX, where=f"handler {jobtype!r}")
        style: CallStyle = (
            "job" if with_job else ("args_and_job" if _takes_job_keyword(func) else "args")
        )
        return cls(
            jobtype=jobtype, func=func, style=style, is_async=_is_async(func), timeout=timeout
        )

    def call(self, args: list[Any], job: Job | None) -> Any:
        """Invoke with the handler's calling convention (returns a coroutine if async); ``job``
        may be None for a handler that takes only the args."""
        if self.style == "job":
            return self.func(job)
        if self.style == "args_and_job":
            return self.func(*args, job=job)
        return self.func(*args)


class Registry:
    """Handlers by jobtype, plus the middleware that wraps every job.

    ``Registry({"send_email": send_email})`` or the decorator ``@registry.handler("send_email")``.
    """

    def __init__(self, handlers: Mapping[str, Callable[..., Any]] | None = None) -> None:
        self._handlers: dict[str, Handler] = {}
        self._middleware: list[Middleware] = []
        self._startup: list[Hook] = []
        self._shutdown: list[Hook] = []
        for jobtype, func in (handlers or {}).items():
            self.register(jobtype, func)

    def register(
        self,
        jobtype: str,
        func: Callable[..., Any],
        *,
        with_job: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Register ``func`` for ``jobtype``; registering a jobtype twice is a mistake.

        ``timeout``: seconds one attempt may run (a job's ``custom.timeout`` overrides it).
        """
        if not jobtype:
            raise ValueError("jobtype must be a non-empty string")
        if jobtype in self._handlers:
            raise ValueError(f"a handler for {jobtype!r} is already registered")
        self._handlers[jobtype] = Handler.create(jobtype, func, with_job=with_job, timeout=timeout)

    def handler(
        self, jobtype: str | None = None, *, with_job: bool = False, timeout: float | None = None
    ) -> Callable[[F], F]:
        """Decorator: register the function (under its own name unless ``jobtype`` is given).

        The function is returned unchanged, so it stays directly callable and picklable.
        """

        def decorate(func: F) -> F:
            self.register(jobtype or func.__name__, func, with_job=with_job, timeout=timeout)
            return func

        return decorate

    def middleware(self, func: Middleware) -> Middleware:
        """Add a middleware (usable as a decorator); the first added is the outermost."""
        self._middleware.append(func)
        return func

    def on_startup(self, func: Hook) -> Hook:
        """Run ``func`` once when a worker starts, before it fetches (open pools, warm caches).

        An exception stops the worker from starting. In process mode hooks run in the worker
        process only, not in the job processes.
        """
        self._startup.append(func)
        return func

    def on_shutdown(self, func: Hook) -> Hook:
        """Run ``func`` once when a worker stops, after its jobs were settled."""
        self._shutdown.append(func)
        return func

    @property
    def startup_hooks(self) -> list[Hook]:
        return list(self._startup)

    @property
    def shutdown_hooks(self) -> list[Hook]:
        return list(self._shutdown)

    def include(self, other: Registry) -> None:
        """Merge another registry's handlers and middleware into this one."""
        for handler in other._handlers.values():
            if handler.jobtype in self._handlers:
                raise ValueError(f"a handler for {handler.jobtype!r} is already registered")
            self._handlers[handler.jobtype] = handler
        self._middleware.extend(other._middleware)
        self._startup.extend(other._startup)
        self._shutdown.extend(other._shutdown)

    def get(self, jobtype: str) -> Handler | None:
        return self._handlers.get(jobtype)

    @property
    def middlewares(self) -> list[Middleware]:
        return list(self._middleware)

    @property
    def jobtypes(self) -> list[str]:
        return sorted(self._handlers)

    def __contains__(self, jobtype: object) -> bool:
        return jobtype in self._handlers

    def __iter__(self) -> Iterator[str]:
        return iter(self._handlers)

    def __len__(self) -> int:
        return len(self._handlers)

    def __repr__(self) -> str:
        return f"Registry({self.jobtypes!r})"
