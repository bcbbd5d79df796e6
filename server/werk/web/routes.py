"""Dashboard pages and the form actions behind their buttons. Pages read through the services;
actions (POST, same-origin only) call the same service methods as the admin API and redirect
back (post/redirect/get) with a fixed message."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import cache
from typing import Annotated, Any
from urllib.parse import parse_qs, quote, unquote_plus, urlencode

import jinja2
import orjson
from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from werk.domain.job import WorkerState
from werk.errors import (
    BatchNotFound,
    InvalidRequest,
    JobNotFound,
    TooManyAuthFailures,
    WerkError,
)
from werk.http.deps import ServicesDep
from werk.http.proxies import client_address
from werk.services.access import Authenticator, Principal
from werk.services.admin import JobAction, JobQuery
from werk.services.views import batch_view, dumps, job_view
from werk.web import charts
from werk.web.security import (
    SESSION_COOKIE,
    check_same_origin,
    clear_session,
    current_user,
    harden,
    new_nonce,
    root,
    safe_next,
    set_session,
    template_globals,
)


def plain_text(request: Request) -> None:
    """A NUL cannot be stored or compared in PostgreSQL text: refused wherever the dashboard
    reads input (the path and query here, forms in form_fields)."""
    query = request.query_params.multi_items()
    if "\x00" in request.scope["path"] or any("\x00" in k + v for k, v in query):
        raise InvalidRequest("the request holds a NUL character")


router = APIRouter(include_in_schema=False, dependencies=[Depends(plain_text)])

UserDep = Annotated[Principal | None, Depends(current_user)]


@dataclass(frozen=True, slots=True)
class JobSearch:
    """A page of a job list as asked for: where it starts (``cursor``), the words searched
    (``q``) and the jobtype it shows (both optional)."""

    cursor: str | None = None
    q: str | None = None
    jobtype: str | None = None

    def params(self) -> dict[str, str]:
        """The search, without the page, as URL parameters."""
        return {k: v for k, v in (("q", self.q), ("jobtype", self.jobtype)) if v}

    def narrowed(self, query: JobQuery) -> JobQuery:
        return replace(query, text=self.q or None, jobtype=self.jobtype or None)


SearchDep = Annotated[JobSearch, Depends()]
HISTORY_DAYS = (7, 30, 90, 180)
PAGE_SIZE = 50
# Bulk buttons ("retry all") change at most this many jobs per click and say how many changed.
BULK_LIMIT = 10_000
# Counts in a message (?done=...&n=) have at most this many digits; a form at most this many fields.
MAX_COUNT_DIGITS = 18
MAX_FORM_FIELDS = 5000

# Which buttons each list shows (and which actions a form may ask for there).
LISTS: dict[str, dict[str, Any]] = {
    "retries": {"title": "Retries", "query": JobQuery(state="retrying"),
                "actions": ("retry", "kill", "cancel", "delete")},
    "scheduled": {"title": "Scheduled", "query": JobQuery(state="scheduled", failed=False),
                  "actions": ("retry", "kill", "cancel", "delete")},
    "dead": {"title": "Dead", "query": JobQuery(state="dead"),
             "actions": ("retry", "delete")},
    "completed": {"title": "Completed", "query": JobQuery(state="completed"),
                  "actions": ("delete",)},
    "expired": {"title": "Expired", "query": JobQuery(state="expired"),
                "actions": ("retry", "delete")},
    "waiting": {"title": "Waiting", "query": JobQuery(state="waiting"),
                "actions": ("kill", "cancel", "delete")},
    "skipped": {"title": "Skipped", "query": JobQuery(state="skipped"),
                "actions": ("retry", "delete")},
    "cancelled": {"title": "Cancelled", "query": JobQuery(state="cancelled"),
                  "actions": ("delete",)},
}  # fmt: skip
ACTION_LABELS = {"retry": "Retry now", "kill": "Kill", "cancel": "Cancel", "delete": "Delete"}
JOB_ACTIONS: dict[str, JobAction] = {"retry": "retry", "kill": "kill", "cancel": "cancel",
                                     "delete": "delete"}  # fmt: skip
MESSAGES = {
    "retry": "{n} job(s) queued to run now.",
    "kill": "{n} job(s) moved to dead.",
    "cancel": "{n} job(s) cancelled.",
    "delete": "{n} job(s) deleted.",
    "pause": "Queue paused: it hands out no jobs (pushes are still accepted).",
    "resume": "Queue resumed.",
    "clear": "{n} waiting job(s) deleted from the queue.",
    "quiet": "{n} worker(s) told to quiet (on their next beat).",
    "terminate": "{n} worker(s) told to terminate (on their next beat).",
}


@cache
def _templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("werk.web", "templates"),
        autoescape=True,  # everything is HTML-escaped; nothing is marked safe
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ago"] = _ago
    env.filters["duration"] = _duration
    env.filters["pretty"] = _pretty
    env.filters["ts"] = _timestamp
    env.filters["pathq"] = lambda v: quote(str(v), safe="")
    env.filters["compact"] = lambda v: dumps(v).decode()
    env.filters["num"] = lambda v: f"{int(v):,}"
    return env


def _now() -> datetime:
    return datetime.now(UTC)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = max(float(seconds), 0.0)
    if s < 1:
        return f"{s * 1000:.0f} ms" if s else "0 s"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s / size:.1f} {unit}"
    return f"{s:.1f} s"


def _ago(value: datetime | None) -> str:
    if value is None:
        return ""
    delta = (_now() - value).total_seconds()
    return f"{_duration(abs(delta))} {'ago' if delta >= 0 else 'from now'}"


def _timestamp(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if value else ""


def _pretty(value: Any) -> str:
    return dumps(value, orjson.OPT_INDENT_2).decode()


def render(
    request: Request, name: str, user: Principal | None, status: int = 200, **context: Any
) -> Response:
    nonce = new_nonce()
    html = (
        _templates()
        .get_template(name)
        .render(
            **template_globals(request, nonce, user),
            request_path=request.url.path,
            message=_message(request),
            **context,
        )
    )
    return harden(HTMLResponse(html, status_code=status), nonce)


def _message(request: Request) -> str | None:
    """Fixed texts only: the query names one and gives a count, never the text itself."""
    template = MESSAGES.get(request.query_params.get("done", ""))
    if template is None:
        return None
    n = request.query_params.get("n", "0")
    if not (n.isascii() and n.isdigit() and len(n) <= MAX_COUNT_DIGITS):
        raise InvalidRequest("n must be a count (a whole number)")
    return template.format(n=int(n))


def back_to(request: Request, path: str, **params: str | int) -> Response:
    target = safe_next(path)
    if params:
        target += ("&" if "?" in target else "?") + urlencode(params)
    return harden(RedirectResponse(root(request) + target, status_code=303), new_nonce())


async def form_fields(request: Request) -> dict[str, list[str]]:
    """The posted urlencoded form (the dashboard posts nothing else)."""
    body = await request.body()
    if not body:
        return {}
    content_type = request.headers.get("content-type", "")
    if not content_type.startswith("application/x-www-form-urlencoded"):
        raise InvalidRequest("expected a form (application/x-www-form-urlencoded)")
    text = body.decode("utf-8", "replace")
    if "\x00" in unquote_plus(text):
        raise InvalidRequest("the form holds a NUL character")
    try:
        return parse_qs(text, keep_blank_values=False, max_num_fields=MAX_FORM_FIELDS)
    except ValueError:
        raise InvalidRequest(f"a form has at most {MAX_FORM_FIELDS} fields") from None


def _one(fields: dict[str, list[str]], name: str, default: str = "") -> str:
    values = fields.get(name)
    return values[0] if values else default


# -- login -------------------------------------------------------------------------------


@router.get("/login")
async def login_page(request: Request, next: str = "/") -> Response:
    auth: Authenticator = request.app.state.auth
    if not auth.enabled:
        return back_to(request, safe_next(next))
    return render(request, "login.html", None, next=safe_next(next), error=None)


@router.post("/login")
async def login(request: Request, services: ServicesDep) -> Response:
    check_same_origin(request)
    auth: Authenticator = request.app.state.auth
    fields = await form_fields(request)
    next_path = safe_next(_one(fields, "next", "/"))
    if not auth.enabled:
        return back_to(request, next_path)
    client = client_address(request)
    try:
        auth.check_client(client)
    except TooManyAuthFailures as exc:
        return render(request, "login.html", None, status=429, next=next_path, error=exc.detail)
    presented = _one(fields, "token").strip()
    principal = auth.identify(presented)
    if principal is None or not principal.allows("admin"):
        auth.limiter.record(client)
        error = "That token is not valid for the dashboard (it needs the admin scope)."
        return render(request, "login.html", None, status=401, next=next_path, error=error)
    cookie = await services.sessions.issue(
        principal.name, hashlib.sha256(presented.encode()).digest()
    )
    response = back_to(request, next_path)
    set_session(request, response, cookie, services.sessions.max_age)
    return response


@router.post("/logout")
async def logout(request: Request, services: ServicesDep) -> Response:
    check_same_origin(request)
    await services.sessions.end(request.cookies.get(SESSION_COOKIE))
    response = back_to(request, "/login")
    clear_session(request, response)
    return response


# -- pages -------------------------------------------------------------------------------


@router.get("/")
async def overview(
    request: Request,
    services: ServicesDep,
    user: UserDep,
    days: Annotated[int, Query()] = 30,
) -> Response:
    if days not in HISTORY_DAYS:
        days = 30
    # Counts per state come from the (briefly cached) queue list, totals from the counters:
    # no extra pass over the jobs per page load.
    queues = await services.queues.list(max_age=2.0)
    states: dict[str, int] = {}
    for q in queues:
        for state, n in q.counts.items():
            states[state] = states.get(state, 0) + n
    history = await services.admin.history(days)
    return render(
        request,
        "overview.html",
        user,
        totals=await services.admin.totals(),
        states=states,
        queues=queues,
        days=days,
        history_days=HISTORY_DAYS,
        history_chart=charts.history_chart(history),
        depth_chart=charts.depth_chart(queues),
    )


@router.get("/_stats")
async def stats(request: Request, services: ServicesDep, user: UserDep) -> Response:
    """Totals for the live graph (polled by werk.js)."""
    totals = await services.admin.totals()
    body = orjson.dumps(
        {"t": time.time(), "processed": totals["processed"], "failed": totals["failed"]}
    )
    return harden(Response(body, media_type="application/json"), new_nonce())


@router.get("/queues")
async def queues_page(request: Request, services: ServicesDep, user: UserDep) -> Response:
    queues = await services.queues.list(max_age=2.0)
    return render(
        request, "queues.html", user, queues=queues, depth_chart=charts.depth_chart(queues)
    )


@router.get("/queues/{name}")
async def queue_page(
    request: Request,
    services: ServicesDep,
    user: UserDep,
    name: str,
    search: SearchDep,
    state: str = "available",
    order: str = "newest",
) -> Response:
    listed = [q for q in await services.queues.list(max_age=2.0) if q.name == name]
    queue = listed[0] if listed else await services.queues.get(name)
    page = await services.admin.list_jobs(
        search.narrowed(JobQuery(state=state or None, queue=name)),
        cursor=search.cursor,
        limit=PAGE_SIZE,
        newest_first=order != "oldest",
    )
    return render(
        request,
        "queue.html",
        user,
        queue=queue,
        state=state,
        order=order,
        search=search,
        page=page,
        states=(
            "available",
            "active",
            "scheduled",
            "retrying",
            "waiting",
            "dead",
            "expired",
            "skipped",
            "cancelled",
        ),
        actions=("retry", "kill", "cancel", "delete"),
        action_labels=ACTION_LABELS,
        back=f"/queues/{quote(name)}?{urlencode({'state': state, **search.params()})}",
    )


async def _list_page(
    request: Request, services: ServicesDep, user: Principal | None, key: str,
    search: JobSearch,
) -> Response:  # fmt: skip
    spec = LISTS[key]
    query = search.narrowed(spec["query"])
    page = await services.admin.list_jobs(query, cursor=search.cursor, limit=PAGE_SIZE)
    params = search.params()
    return render(
        request,
        "jobs.html",
        user,
        key=key,
        title=spec["title"],
        page=page,
        search=search,
        actions=spec["actions"],
        action_labels=ACTION_LABELS,
        back=f"/{key}?{urlencode(params)}" if params else f"/{key}",
    )


@router.get("/retries")
async def retries_page(
    request: Request, services: ServicesDep, user: UserDep,
    search: SearchDep,
) -> Response:  # fmt: skip
    return await _list_page(request, services, user, "retries", search)


@router.get("/scheduled")
async def scheduled_page(
    request: Request, services: ServicesDep, user: UserDep,
    search: SearchDep,
) -> Response:  # fmt: skip
    return await _list_page(request, services, user, "scheduled", search)


@router.get("/dead")
async def dead_page(
    request: Request, services: ServicesDep, user: UserDep,
    search: SearchDep,
) -> Response:  # fmt: skip
    return await _list_page(request, services, user, "dead", search)


@router.get("/completed")
async def completed_page(
    request: Request, services: ServicesDep, user: UserDep,
    search: SearchDep,
) -> Response:  # fmt: skip
    """Jobs kept after their ack (pushed with keep_result_for, or WERK_COMPLETED_RETENTION)."""
    return await _list_page(request, services, user, "completed", search)


@router.get("/expired")
async def expired_page(
    request: Request, services: ServicesDep, user: UserDep,
    search: SearchDep,
) -> Response:  # fmt: skip
    return await _list_page(request, services, user, "expired", search)


@router.get("/waiting")
async def waiting_page(
    request: Request, services: ServicesDep, user: UserDep,
    search: SearchDep,
) -> Response:  # fmt: skip
    return await _list_page(request, services, user, "waiting", search)


@router.get("/skipped")
async def skipped_page(
    request: Request, services: ServicesDep, user: UserDep,
    search: SearchDep,
) -> Response:  # fmt: skip
    """Jobs that never ran because a dependency ended badly (on_dependency_failure skip)."""
    return await _list_page(request, services, user, "skipped", search)


@router.get("/cancelled")
async def cancelled_page(
    request: Request, services: ServicesDep, user: UserDep,
    search: SearchDep,
) -> Response:  # fmt: skip
    return await _list_page(request, services, user, "cancelled", search)


@router.get("/batches")
async def batches_page(
    request: Request, services: ServicesDep, user: UserDep,
    cursor: str | None = None, unfinished: bool = False,
) -> Response:  # fmt: skip
    rows = await services.batches.list(cursor, PAGE_SIZE + 1, unfinished)
    page = rows[:PAGE_SIZE]
    return render(
        request,
        "batches.html",
        user,
        batches=[batch_view(r) for r in page],
        next=page[-1]["bid"] if len(rows) > PAGE_SIZE else None,
        unfinished=unfinished,
    )


@router.get("/batches/{bid}")
async def batch_page(request: Request, services: ServicesDep, user: UserDep, bid: str) -> Response:
    try:
        batch = await services.batches.get(bid)
    except BatchNotFound:
        return render(request, "missing.html", user, status=404, jid=bid, what="batch")
    members = await services.batches.members(bid, PAGE_SIZE)
    return render(request, "batch.html", user, b=batch_view(batch), members=members)


@router.get("/jobs/{jid:path}")
async def job_page(request: Request, services: ServicesDep, user: UserDep, jid: str) -> Response:
    try:
        job = await services.push.get(jid)
    except JobNotFound:
        return render(request, "missing.html", user, status=404, jid=jid)
    return render(
        request,
        "job.html",
        user,
        job=job,
        raw=job_view(job),  # the job as the API shows it (never its lease)
        action_labels=ACTION_LABELS,
        actions=_actions_for(job["state"]),
        back=f"/jobs/{quote(jid, safe='')}",
    )


def _actions_for(state: str) -> tuple[str, ...]:
    return {
        "scheduled": ("retry", "kill", "cancel", "delete"),
        "available": ("kill", "cancel", "delete"),
        "active": ("kill", "cancel", "delete"),
        "dead": ("retry", "delete"),
        "expired": ("retry", "delete"),
        "waiting": ("kill", "cancel", "delete"),
        "skipped": ("retry", "delete"),
    }.get(state, ("delete",))


@router.get("/workers")
async def workers_page(
    request: Request, services: ServicesDep, user: UserDep, cursor: str | None = None
) -> Response:
    workers = await services.admin.workers()
    busy = await services.admin.list_jobs(JobQuery(state="active"), cursor=cursor, limit=PAGE_SIZE)
    return render(request, "workers.html", user, workers=workers, busy=busy, now=_now())


# -- actions (POST, same-origin) ---------------------------------------------------------


async def _guard(request: Request) -> Principal | None:
    check_same_origin(request)
    return await current_user(request)


GuardDep = Annotated[Principal | None, Depends(_guard)]


@router.post("/actions/jobs")
async def jobs_action(request: Request, services: ServicesDep, user: GuardDep) -> Response:
    """Apply an action to the ticked jobs, to one job, or to every job of a list ("all")."""
    fields = await form_fields(request)
    action = _one(fields, "action")
    back = safe_next(_one(fields, "back", "/"))
    act = JOB_ACTIONS.get(action)
    if act is None:
        raise InvalidRequest(f"unknown action {action!r}")
    # "... all" buttons post to ?scope=all (formaction), so they work without JavaScript.
    scope = request.query_params.get("scope") or _one(fields, "scope", "selected")
    if scope == "all":
        list_key = _one(fields, "list")
        if list_key in LISTS:
            base: JobQuery = LISTS[list_key]["query"]
            if action not in LISTS[list_key]["actions"]:
                raise InvalidRequest(f"{action} does not apply to {list_key}")
        else:  # a queue's jobs in one state
            base = JobQuery(
                state=_one(fields, "state") or None, queue=_one(fields, "queue") or None
            )
        # The list as searched: "all" is every job the search left on it.
        base = JobSearch(q=_one(fields, "q"), jobtype=_one(fields, "jobtype")).narrowed(base)
        n = await services.admin.act_bulk(act, base, limit=BULK_LIMIT)
    else:
        jids = fields.get("jid", [])
        n = await services.admin.act_many(act, jids)
        if action == "delete" and back.startswith("/jobs/"):
            back = "/"
    return back_to(request, back, done=action, n=n)


@router.post("/actions/queues/{name}/{action}")
async def queue_action(
    request: Request, services: ServicesDep, user: GuardDep, name: str, action: str
) -> Response:
    fields = await form_fields(request)
    back = safe_next(_one(fields, "back", "/queues"))
    n = 0
    if action == "pause":
        await services.queues.pause(name)
    elif action == "resume":
        await services.queues.resume(name)
    elif action == "clear":
        n = await services.queues.clear(name)
    else:
        raise InvalidRequest(f"unknown queue action {action!r}")
    return back_to(request, back, done=action, n=n)


@router.post("/actions/workers")
async def workers_action(request: Request, services: ServicesDep, user: GuardDep) -> Response:
    fields = await form_fields(request)
    action = _one(fields, "action")
    if action not in ("quiet", "terminate"):
        raise InvalidRequest(f"unknown worker action {action!r}")
    state = WorkerState(action)
    wid = _one(fields, "wid")
    if wid:
        try:
            await services.admin.signal(wid, state)
            n = 1
        except WerkError:
            n = 0
    else:
        n = await services.admin.signal_all(state)
    return back_to(request, "/workers", done=action, n=n)
