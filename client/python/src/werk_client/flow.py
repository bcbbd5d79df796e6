"""A graph of jobs (a flow) built in code and pushed in one request, all or nothing: each job
may depend on jobs added before it; the server runs a job once its dependencies are settled
and hands it their results (``job.dependencies``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .models import JobSpec, Needs


class Flow:
    """Jobs and their dependencies, for ``Client.push_flow``::

        flow = Flow()
        fetch = flow.add("fetch", ["https://example.com"], ref="fetch")
        parse = flow.add("parse", depends_on=[fetch])
        flow.add("report", depends_on=[parse], on_dependency_failure="skip")
        client.push_flow(flow)

    ``depends_on`` takes jobs of the flow (the ``JobSpec`` that ``add`` returned), or jids of
    jobs stored already. Options are those of ``JobSpec`` (``queue``, ``retry``, ...).
    """

    def __init__(self) -> None:
        self.jobs: list[JobSpec] = []

    def add(
        self,
        jobtype: str,
        args: Sequence[Any] | None = None,
        *,
        depends_on: Iterable[JobSpec | str | Needs] = (),
        on_dependency_failure: str | None = None,
        ref: str | None = None,
        **options: Any,
    ) -> JobSpec:
        """Add a job; returns it (its jid is fixed already), to name in later ``depends_on``."""
        deps = list(depends_on)
        spec = JobSpec(
            jobtype,
            list(args or []),
            depends_on=deps or None,
            on_dependency_failure=on_dependency_failure,
            ref=ref,
            **options,
        )
        self.jobs.append(spec)
        return spec

    def refs(self) -> Mapping[str, str]:
        """Each ref given to ``add`` mapped to its job's jid."""
        return {s.ref: s.jid for s in self.jobs if s.ref is not None}

    def __len__(self) -> int:
        return len(self.jobs)
