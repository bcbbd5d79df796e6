"""Dependencies between the jobs of a push: refs resolved to jids, the edges as they are
written, and the rules a batch must keep (refs unique, no job depending on itself or twice on
the same job, no cycle). Whether a dependency outside the batch exists the push statement says."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from werk.domain.job import JID_MIN_LENGTH, DependencyEdge
from werk.errors import DependencyCycle, DependencyNotFound, InvalidRequest

if TYPE_CHECKING:
    from werk.domain.bodies import JobPush


def dependency_edges(jobs: Sequence[tuple[str, JobPush]]) -> list[DependencyEdge]:
    """The edges of a batch of (jid, spec), each depends_on entry resolved: a ref of the batch
    first, else a jid (the refs are unique: the push checked). Raises InvalidRequest (a
    dependency twice),
    DependencyNotFound (a name too short to be a jid and no ref) or DependencyCycle."""
    refs = {spec.ref: jid for jid, spec in jobs if spec.ref is not None}
    edges: list[DependencyEdge] = []
    for i, (jid, spec) in enumerate(jobs):
        seen: set[str] = set()
        for k, item in enumerate(spec.depends_on or ()):
            if isinstance(item, str):
                name, policy = item, spec.on_dependency_failure
            else:
                name = item.job
                policy = item.on_failure or spec.on_dependency_failure
            loc = f"jobs.{i}.depends_on.{k}"
            dep = refs.get(name, name)
            if dep not in refs.values() and len(dep) < JID_MIN_LENGTH:
                raise DependencyNotFound(
                    f"{name!r} is no ref of this batch (and too short for a jid)",
                    errors=[{"loc": loc, "message": "unknown ref"}],
                )
            if dep == jid:
                raise DependencyCycle(
                    f"job {jid!r} depends on itself", errors=[{"loc": loc, "message": "itself"}]
                )
            if dep in seen:
                raise InvalidRequest(
                    f"{name!r} appears twice in the depends_on of job {jid!r}",
                    errors=[{"loc": loc, "message": "duplicate dependency"}],
                )
            seen.add(dep)
            edges.append(DependencyEdge(jid, dep, policy, name if name in refs else None))
    _check_acyclic([jid for jid, _ in jobs], edges)
    return edges


def _check_acyclic(jids: Sequence[str], edges: Sequence[DependencyEdge]) -> None:
    """Kahn's order over the batch's own jobs: what it cannot order lies on a cycle."""
    inside = set(jids)
    after: dict[str, list[str]] = {}
    blocking = dict.fromkeys(jids, 0)
    for e in edges:
        if e.dep in inside:
            after.setdefault(e.dep, []).append(e.jid)
            blocking[e.jid] += 1
    ready = [jid for jid, n in blocking.items() if n == 0]
    ordered = 0
    while ready:
        jid = ready.pop()
        ordered += 1
        for nxt in after.get(jid, ()):
            blocking[nxt] -= 1
            if blocking[nxt] == 0:
                ready.append(nxt)
    if ordered < len(jids):
        stuck = sorted(jid for jid, n in blocking.items() if n > 0)
        raise DependencyCycle(
            f"the dependencies of {len(stuck)} jobs form a cycle (among {', '.join(stuck[:10])})",
            errors=[{"loc": "jobs", "message": "dependency cycle"}],
        )
