"""What one answer (a fetch, a read of one job) carries of its jobs' dependencies. A job may
depend on thousands of jobs, each with a result, and a fetch answers up to a hundred jobs: the
answer lists dependencies and carries their results only up to a budget, counted across its
jobs in jid order, and says what it left out; the job's dependency pages hold the rest."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from werk.db import queries
from werk.db.queries import Executor

Row = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class AnswerBudget:
    """``results_bytes``: the results one answer carries add up to at most this (the rest are
    ``result_omitted``); ``listed``: it lists at most this many dependencies (a job listed in
    part, or not at all, is ``dependencies_omitted``)."""

    results_bytes: int
    listed: int


async def with_dependencies(db: Executor, rows: Sequence[Row], budget: AnswerBudget) -> list[Row]:
    """``rows`` with, for each job pushed with depends_on, the dependencies the budget lists
    (``dependency_edges``), and ``dependencies_omitted`` where it lists only some."""
    if not any(r["dependencies"] for r in rows):
        return list(rows)
    edges = await queries.job_dependencies(
        db, [r["jid"] for r in rows if r["dependencies"]], budget.results_bytes, budget.listed + 1
    )
    # The first dependency beyond the budget: its job, and every job after it, lists only part.
    cut = edges[budget.listed]["jid"] if len(edges) > budget.listed else None
    by_job: dict[str, list[Row]] = {}
    for e in edges[: budget.listed]:
        by_job.setdefault(e["jid"], []).append(e)
    answer: list[Row] = []
    for r in rows:
        if r["dependencies"]:
            r = {**r, "dependency_edges": by_job.get(r["jid"], [])}
            if cut is not None and r["jid"] >= cut:
                r["dependencies_omitted"] = True
        answer.append(r)
    return answer
