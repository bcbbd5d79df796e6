"""Batches in the SDK: ``client.batch(...)`` opens a group of jobs with callbacks; inside the
``with`` block every push joins it, and leaving the block commits it. A block left by an
exception does not commit: the batch stays open (open it again to finish it, or leave it).

with client.batch(description="import", on_success=JobSpec("notify", ["done"])) as b:
    for row in rows:
        b.push("import_row", [row])

A job inside a batch adds work to it from inside, then lets it finish:

with client.open_batch(job.batch) as b:
    b.push("more", [1])
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from . import protocol
from .models import BatchStatus, JobRecord, JobSpec, PushManyResult

if TYPE_CHECKING:
    from .async_client import AsyncClient
    from .client import Client

__all__ = ["AsyncBatch", "Batch"]


class Batch:
    """An open batch of a blocking ``Client``: ``bid`` names it once the block is entered."""

    def __init__(self, client: Client, bid: str | None = None, **new: Any) -> None:
        self._client = client
        self._new = new
        self.bid = bid or ""

    def __enter__(self) -> Self:
        if self.bid:
            self._client.reopen_batch(self.bid)
        else:
            self.bid = self._client.create_batch(**self._new).bid
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self._client.commit_batch(self.bid)

    def push(self, jobtype: str, args: Sequence[Any] | None = None, **options: Any) -> JobRecord:
        """``Client.push`` of a job that joins this batch."""
        return self._client.push(jobtype, args, batch=self.bid, **options)

    def push_many(self, jobs: Iterable[JobSpec | Mapping[str, Any]]) -> PushManyResult:
        """``Client.push_many`` of jobs that join this batch."""
        return self._client.push_many(
            protocol.in_batch(protocol.as_spec(j), self.bid) for j in jobs
        )

    def batch(self, **new: Any) -> Batch:
        """A child batch: a member of this one (settled in it when it finishes)."""
        return Batch(self._client, parent=self.bid, **new)

    def status(self) -> BatchStatus:
        return self._client.batch_status(self.bid)


class AsyncBatch:
    """An open batch of an ``AsyncClient``, used with ``async with``."""

    def __init__(self, client: AsyncClient, bid: str | None = None, **new: Any) -> None:
        self._client = client
        self._new = new
        self.bid = bid or ""

    async def __aenter__(self) -> Self:
        if self.bid:
            await self._client.reopen_batch(self.bid)
        else:
            self.bid = (await self._client.create_batch(**self._new)).bid
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            await self._client.commit_batch(self.bid)

    async def push(
        self, jobtype: str, args: Sequence[Any] | None = None, **options: Any
    ) -> JobRecord:
        return await self._client.push(jobtype, args, batch=self.bid, **options)

    async def push_many(self, jobs: Iterable[JobSpec | Mapping[str, Any]]) -> PushManyResult:
        return await self._client.push_many(
            protocol.in_batch(protocol.as_spec(j), self.bid) for j in jobs
        )

    def batch(self, **new: Any) -> AsyncBatch:
        return AsyncBatch(self._client, parent=self.bid, **new)

    async def status(self) -> BatchStatus:
        return await self._client.batch_status(self.bid)
