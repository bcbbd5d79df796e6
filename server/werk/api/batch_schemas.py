"""Wire models of batches."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec
from pydantic import BaseModel, Field

from werk.domain import batches as rules
from werk.domain.bodies import Body, CallbackJob, MText, texts

Bid = Annotated[MText, msgspec.Meta(min_length=8, max_length=rules.BID_MAX_LENGTH)]
_CALLBACK = (
    "A job pushed (as for `POST /v1/jobs`, without `at`, `unique`, `depends_on`, `batch`, "
    "expiry or `ref`) waiting for its batch; it runs, and retries, like any job. A `jid` that "
    "names a stored job is refused (422)."
)


class BatchNew(Body):
    description: Annotated[MText, msgspec.Meta(max_length=rules.DESCRIPTION_MAX_LENGTH)] | None = (
        None
    )
    parent: Annotated[
        Bid | None,
        msgspec.Meta(
            description="An open batch this one is a member of: it settles in the parent when "
            "it finishes, and its first death is the parent's too. Batches nest at most "
            f"{rules.MAX_DEPTH} deep (422 past that)."
        ),
    ] = None
    on_complete: Annotated[
        CallbackJob | None,
        msgspec.Meta(description=f"Run once every member has settled. {_CALLBACK}"),
    ] = None
    on_success: Annotated[
        CallbackJob | None,
        msgspec.Meta(description=f"Run once every member has completed. {_CALLBACK}"),
    ] = None
    on_death: Annotated[
        CallbackJob | None,
        msgspec.Meta(
            description="Run once, when the first member ends without completing (dead, "
            "expired, cancelled, skipped, or deleted unfinished); skipped if the batch succeeds "
            f"without. {_CALLBACK}"
        ),
    ] = None

    def __post_init__(self) -> None:
        texts(self, ("description", "parent"))


class Callback(BaseModel):
    jid: str
    state: str | None = Field(
        description="The callback job's state: `waiting` until its condition is met; null once "
        "it is no longer stored."
    )


class Batch(BaseModel):
    bid: str
    description: str | None
    parent: str | None
    children: list[str] = Field(description="Child batches (the first 1,000, oldest first).")
    state: Literal["open", "committed", "finished"] = Field(
        description="`open`: members may join; `committed`: none may join until it is opened "
        "again; `finished`: committed with every member settled (never opened again)."
    )
    created_at: datetime
    committed_at: datetime | None
    total: int = Field(description="Members: jobs and child batches.")
    pending: int = Field(description="Members neither completed nor dead.")
    succeeded: int = Field(description="Members completed (a child batch: all of its members).")
    dead: int = Field(
        description="Members that ended without completing (a retried one is pending again)."
    )
    completed_at: datetime | None = Field(description="When it finished (on_complete fired).")
    succeeded_at: datetime | None = Field(description="When every member had completed.")
    died_at: datetime | None = Field(description="When the first member ended badly.")
    on_complete: Callback | None
    on_success: Callback | None
    on_death: Callback | None


class BatchPage(BaseModel):
    batches: list[Batch]
    next: str | None = Field(description="The cursor of the next page (null: last page).")
