"""Renders stored rows as the API and the dashboard show them. orjson does the encoding: datetimes
as RFC 3339, UTC written ``Z`` (what schema-generated validators such as zod's ``datetime()``
accept)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from werk.domain.job import JobState, PushResult, is_settled, retries_remaining


def dumps(value: Any, option: int = 0) -> bytes:
    """JSON as every answer writes it (stored times are UTC: the sessions' TimeZone)."""
    return orjson.dumps(value, option=option | orjson.OPT_UTC_Z)


def failure_view(r: Mapping[str, Any]) -> dict[str, Any] | None:
    """The job's last failure (None: it never failed)."""
    if r["failed_at"] is None:
        return None
    return {
        "retry_count": r["retry_count"],
        "remaining": retries_remaining(r["state"], r["retry"], r["retry_count"]),
        "failed_at": r["failed_at"],
        "next_at": r["run_at"] if r["state"] == "scheduled" else None,
        "errtype": r["errtype"],
        "message": r["message"],
        "backtrace": r["error_backtrace"] or [],
    }


_COMPLETED = JobState.COMPLETED.value


def _completed_at(r: Mapping[str, Any]) -> Any:
    return r["finished_at"] if r["state"] == _COMPLETED else None


def result_view(r: Mapping[str, Any]) -> dict[str, Any]:
    """Where a job stands for whoever waits for its result."""
    return {
        "jid": r["jid"],
        "state": r["state"],
        "done": is_settled(r["state"]),
        "result": r["result"],
        "completed_at": _completed_at(r),
        "failure": failure_view(r),
    }


def _attempt_view(r: Mapping[str, Any]) -> dict[str, Any]:
    """What every view of a job shows: the job as pushed and its current attempt."""
    return {
        "jid": r["jid"],
        "jobtype": r["jobtype"],
        "args": r["args"],
        "queue": r["queue"],
        "priority": r["priority"],
        "reserve_for": r["reserve_for"],
        "retry": r["retry"],
        "backtrace": r["backtrace"],
        "custom": r["custom"],
        "at": r["at"],
        "state": r["state"],
        "created_at": r["created_at"],
        "enqueued_at": r["enqueued_at"],
        "attempt": r["attempt"],
        "progress": r["progress"],
        "failure": None if r["failed_at"] is None else failure_view(r),
        "lease_expires_at": r["lease_expires_at"],
        "wid": r["wid"],
    }


def _with_relations(view: dict[str, Any], r: Mapping[str, Any]) -> dict[str, Any]:
    """``view`` with the job's batch, and its dependencies and dependents when the row carries
    them (``dependency_edges``, ``dependent_edges``: a fetch and a read of one job add them)."""
    if r.get("batch") is not None:
        view["batch"] = r["batch"]
    if r["dependencies"] and (edges := r.get("dependency_edges")) is not None:
        view["dependencies"] = [dependency_view(e) for e in edges]
        if r.get("dependencies_omitted"):
            view["dependencies_omitted"] = True
    if r["dependents"] and (dependents := r.get("dependent_edges")):
        view["dependents"] = [
            {"jid": d["jid"], "state": d["state"], "on_failure": d["on_failure"]}
            for d in dependents
        ]
    return view


def job_view(r: Mapping[str, Any]) -> dict[str, Any]:
    """The job as the API shows it."""
    view = _attempt_view(r)
    view["keep_result_for"] = r["keep_result_for"] or 0
    view["result"] = r["result"]
    view["completed_at"] = _completed_at(r)
    view["expires_at"] = r["expires_at"]
    view["unique"] = r["unique_spec"]
    return _with_relations(view, r)


def dependency_view(e: Mapping[str, Any]) -> dict[str, Any]:
    """One dependency of a job: how it ended (null: not yet), and its result if it completed,
    unless the answer's budget left it out (``result_omitted``, shown only then)."""
    view = {
        "jid": e["dep"],
        "ref": e["ref"],
        "on_failure": e["on_failure"],
        "outcome": e["outcome"],
        "result": e["result"],
        "settled_at": e["settled_at"],
    }
    if e["result_omitted"]:
        view["result_omitted"] = True
    return view


def _with_options(view: dict[str, Any], r: Mapping[str, Any]) -> dict[str, Any]:
    """``view`` with the job's retention, expiry and unique lock only when it has them, and its
    relations (``_with_relations``): fetches and pushes answer many jobs at a time, and every key
    of every job costs the server and the client alike."""
    if r["keep_result_for"]:
        view["keep_result_for"] = r["keep_result_for"]
    if r["expires_at"] is not None:
        view["expires_at"] = r["expires_at"]
    if r["unique_spec"] is not None:
        view["unique"] = r["unique_spec"]
    return _with_relations(view, r)


def fetched_view(r: Mapping[str, Any]) -> dict[str, Any]:
    """The job as its fetch hands it to a worker, with the lease: only the fetch answer, to the
    worker that now holds it, shows a lease (with it anyone could settle the job). An active job
    has no result. The claim says which jobs have options or relations (``has_options``), so a
    plain job's row is not asked for each of them."""
    view = _attempt_view(r)
    view["lease"] = r["lease"]
    return _with_options(view, r) if r["has_options"] else view


def stored_view(r: Mapping[str, Any]) -> dict[str, Any]:
    """A pushed job as stored (``_with_options``), with its result once it completed."""
    view = _attempt_view(r)
    if r["state"] == _COMPLETED:
        view["result"] = r["result"]
        view["completed_at"] = r["finished_at"]
    return _with_options(view, r)


def pushed_view(result: PushResult) -> dict[str, Any]:
    """``stored_view`` of a pushed job. A job the push inserted without reading it back is
    rendered from the job as sent (its JSON as the server encoded it for the insert) and the
    columns the statement decided: the job the database stores, whose jsonb may order an
    object's keys differently, without decoding and re-encoding it."""
    j = result.sent
    if j is None:
        return stored_view(result.job)
    r = result.job
    view = {
        "jid": j.jid,
        "jobtype": j.jobtype,
        "args": orjson.Fragment(j.args),
        "queue": j.queue,
        "priority": j.priority,
        "reserve_for": j.reserve_for,
        "retry": j.retry,
        "backtrace": j.backtrace,
        "custom": orjson.Fragment(j.custom),
        "at": r["at"],
        "state": r["state"],
        "created_at": r["created_at"],
        "enqueued_at": r["enqueued_at"],
        "attempt": 0,
        "progress": None,
        "failure": None,
        "lease_expires_at": None,
        "wid": None,
    }
    # A unique job is never answered from what was sent.
    if j.keep_result_for:
        view["keep_result_for"] = j.keep_result_for
    if r["expires_at"] is not None:
        view["expires_at"] = r["expires_at"]
    return view


def batch_view(r: Mapping[str, Any]) -> dict[str, Any]:
    """A batch as the API shows it."""
    if r["completed_at"] is not None:
        state = "finished"
    elif r["committed"]:
        state = "committed"
    else:
        state = "open"
    view = {
        k: r[k]
        for k in (
            "bid", "description", "parent", "children", "created_at", "committed_at", "total",
            "pending", "succeeded", "dead", "completed_at", "succeeded_at", "died_at",
        )
    }  # fmt: skip
    view["state"] = state
    for kind in ("complete", "success", "death"):
        jid = r[f"{kind}_jid"]
        view[f"on_{kind}"] = None if jid is None else {"jid": jid, "state": r[f"{kind}_state"]}
    return view
