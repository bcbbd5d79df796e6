"""The dashboard over HTTP: every page on seeded data, actions, login sessions, same-origin checks,
escaping, headers, and serving under a proxy's path prefix."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.conftest import InProcess
from tests.integration.admin.support import (
    dead_job,
    fetch_one,
    push,
    retrying_job,
    scheduled_job,
    state_of,
)

ADMIN = "dashboard-admin-token-1234"
PUSH = "dashboard-push-token-1234"
TOKENS = [
    {"name": "ops.team", "token": ADMIN, "scopes": ["admin"]},
    {"name": "producer", "token": PUSH, "scopes": ["push"]},
]
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}
XSS = "<script>alert('pwned')</script>"


async def seed(api: InProcess) -> dict[str, str]:
    jobs = {
        "dead": await dead_job(api, queue="mail", jobtype="Explode"),
        "waiting": await push(api, queue="mail", jobtype="Send", args=[XSS, {"to": "<b>x</b>"}]),
        "retrying": await retrying_job(api, queue="video"),
        "scheduled": await scheduled_job(api, queue="video"),
    }
    await api.http.post("/v1/beat", json={"wid": "w-1", "hostname": "box", "labels": ["py"]})
    await push(api, queue="busy")
    await fetch_one(api, "busy", wid="w-1")
    return jobs


def form(**fields: Any) -> dict[str, Any]:
    return {"data": fields, "headers": SAME_ORIGIN}


async def test_every_page_renders_with_safe_headers(api: InProcess) -> None:
    jobs = await seed(api)
    pages = ["/", "/?days=7", "/?days=180", "/queues", "/queues/mail", "/queues/mail?state=dead",
             "/retries", "/scheduled", "/dead", "/expired", "/skipped", "/cancelled", "/workers",
             f"/jobs/{jobs['dead']}"]  # fmt: skip
    for page in pages:
        r = await api.http.get(page)
        assert r.status_code == 200, (page, r.text[:500])
        assert r.headers["content-type"].startswith("text/html")
        assert r.headers["cache-control"] == "no-store"
        csp = r.headers["content-security-policy"]
        nonce = re.search(r"'nonce-([^']+)'", csp)
        assert nonce and "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
        scripts = re.findall(r"<script[^>]*>", r.text)
        assert scripts and all(f'nonce="{nonce.group(1)}"' in s for s in scripts)
    assert (await api.http.get("/jobs/nosuchjob00")).status_code == 404
    assert (await api.http.get("/static/werk.js")).status_code == 200


async def test_pages_show_the_data(api: InProcess) -> None:
    jobs = await seed(api)
    overview = (await api.http.get("/")).text
    assert "<svg" in overview and "mail" in overview and "video" in overview
    assert jobs["dead"] in (await api.http.get("/dead")).text
    assert jobs["retrying"] in (await api.http.get("/retries")).text
    assert jobs["retrying"] not in (await api.http.get("/scheduled")).text
    assert jobs["scheduled"] in (await api.http.get("/scheduled")).text
    workers = (await api.http.get("/workers")).text
    assert "w-1" in workers and "box" in workers
    page = (await api.http.get(f"/jobs/{jobs['dead']}")).text
    assert "Boom" in page and f"dead {jobs['dead']}" in page
    assert "upstream slow" in (await api.http.get("/retries?q=upstream")).text
    assert jobs["retrying"] not in (await api.http.get("/retries?q=nothing-like-this")).text


async def test_search_by_args_and_custom_lists_the_matching_jobs_only(
    search_api: InProcess,
) -> None:
    api = search_api
    acme = await dead_job(
        api, args=["invoice-4711", {"customer": "acme"}], custom={"tenant": "north"}
    )
    globex = await dead_job(
        api, args=["invoice-4712", {"customer": "globex"}], custom={"tenant": "south"}
    )
    other = await dead_job(api, args=[4711, True])

    async def listed(path: str) -> set[str]:
        r = await api.http.get(path)
        assert r.status_code == 200, r.text[:500]
        return {jid for jid in (acme, globex, other) if jid in r.text}

    assert await listed("/dead") == {acme, globex, other}
    assert await listed("/dead?q=invoice-4711") == {acme}
    assert await listed("/dead?q=globex") == {globex}
    assert await listed("/dead?q=south") == {globex}  # a value of custom
    assert await listed("/dead?q=true") == {other}  # a boolean of args
    assert await listed("/dead?q=invoice") == {acme, globex}  # a word's beginning
    assert await listed("/dead?q=invoice-4711+acme") == {acme}  # every word must match
    assert await listed("/dead?q=invoice-4711+globex") == set()
    assert await listed("/dead?q=customer") == set()  # object keys are not words
    assert await listed("/retries?q=invoice-4711") == set()  # the list's state still holds

    # A queue's page searches its jobs of the state shown, available ones by default.
    waiting = await push(
        api, queue="billing", args=["invoice-4711", {"customer": "acme"}], custom={"tenant": "east"}
    )
    other_waiting = await push(api, queue="billing", args=["invoice-4712"])
    page = (await api.http.get("/queues/billing?q=invoice-4711")).text
    assert waiting in page and other_waiting not in page and acme not in page
    page = (await api.http.get("/queues/billing?state=available&q=east")).text
    assert waiting in page and other_waiting not in page
    assert waiting not in (await api.http.get("/queues/billing?state=dead&q=east")).text
    assert 'name="q" value="east"' in page  # the box keeps the search
    assert "/actions/jobs" in page and 'name="q" value="east"' in page.split("/actions/jobs")[1]
    r = await api.http.post(
        "/actions/jobs?scope=all",
        **form(action="cancel", list="", queue="billing", state="available", q="east",
               back="/queues/billing"),
    )  # fmt: skip
    assert r.status_code == 303, r.text
    assert await state_of(api, waiting) == "cancelled"  # "all" is all the search left
    assert await state_of(api, other_waiting) == "available"
    await api.http.post(f"/v1/jobs/{other_waiting}/cancel")

    kept = await push(api, args=["invoice-4711"], keep_result_for=3600)
    fetched = await fetch_one(api)
    r = await api.http.post(
        f"/v1/jobs/{kept}/ack", json={"lease": fetched["lease"], "result": {"pdf": "ok"}}
    )
    assert r.status_code == 204, r.text
    completed = await api.http.get("/completed?q=invoice-4711")
    assert kept in completed.text and acme not in completed.text
    assert kept not in (await api.http.get("/completed?q=invoice-4712")).text


async def test_a_list_shows_one_jobtype_and_acts_on_it_alone(api: InProcess) -> None:
    invoice = await dead_job(api, jobtype="SendInvoice", args=["acme"])
    other_invoice = await dead_job(api, jobtype="SendInvoice", args=["globex"])
    report = await dead_job(api, jobtype="Report", args=["acme"])

    async def listed(path: str) -> set[str]:
        r = await api.http.get(path)
        assert r.status_code == 200, r.text[:500]
        return {jid for jid in (invoice, other_invoice, report) if jid in r.text}

    assert await listed("/dead?jobtype=SendInvoice") == {invoice, other_invoice}
    assert await listed("/dead?jobtype=SendInvoice&q=acme") == {invoice}
    assert await listed("/dead?jobtype=Send") == set()  # the whole jobtype, not its beginning
    assert await listed("/queues/default?state=dead&jobtype=Report") == {report}
    page = (await api.http.get("/dead?jobtype=SendInvoice")).text
    assert 'name="jobtype" value="SendInvoice"' in page  # the box keeps it
    assert 'name="jobtype" value="SendInvoice"' in page.split("/actions/jobs")[1]  # and "all"
    r = await api.http.post(
        "/actions/jobs?scope=all",
        **form(action="retry", list="dead", jobtype="SendInvoice", back="/dead"),
    )
    assert r.status_code == 303, r.text
    assert r.headers["location"] == "/dead?done=retry&n=2"
    assert {await state_of(api, jid) for jid in (invoice, other_invoice)} == {"available"}
    assert await state_of(api, report) == "dead"


async def test_html_is_escaped_everywhere(api: InProcess) -> None:
    jid = await push(api, jobtype=XSS, args=[XSS], custom={"k": XSS})
    fetched = await fetch_one(api)
    await api.http.post(
        f"/v1/jobs/{jid}/fail",
        json={"lease": fetched["lease"], "errtype": XSS, "message": XSS, "backtrace": [XSS],
              "retry": False},
    )  # fmt: skip
    for page in (f"/jobs/{jid}", "/dead", "/queues/default?state=dead"):
        body = (await api.http.get(page)).text
        assert "<script>alert" not in body, page
        assert "&lt;script&gt;alert" in body, page


async def test_queue_actions(api: InProcess) -> None:
    await seed(api)
    r = await api.http.post("/actions/queues/mail/pause", **form(back="/queues"))
    assert r.status_code == 303
    assert r.headers["location"] == "/queues?done=pause&n=0"
    assert "paused" in (await api.http.get(r.headers["location"])).text
    assert (await api.http.get("/v1/queues/mail")).json()["paused"] is True
    r = await api.http.post("/actions/queues/mail/resume", **form())
    assert (await api.http.get("/v1/queues/mail")).json()["paused"] is False
    r = await api.http.post("/actions/queues/mail/clear", **form(back="/queues/mail"))
    assert r.headers["location"] == "/queues/mail?done=clear&n=1"
    assert (await api.http.get("/v1/queues/mail")).json()["size"] == 0


async def test_job_actions_selected_and_all(api: InProcess) -> None:
    dead = [await dead_job(api) for _ in range(3)]
    r = await api.http.post("/actions/jobs", **form(action="retry", jid=dead[0], back="/dead"))
    assert r.status_code == 303 and r.headers["location"] == "/dead?done=retry&n=1"
    assert await state_of(api, dead[0]) == "available"
    r = await api.http.post(
        "/actions/jobs?scope=all", **form(action="delete", list="dead", back="/dead")
    )
    assert r.headers["location"] == "/dead?done=delete&n=2"
    assert [await state_of(api, j) for j in dead[1:]] == [None, None]
    # kill from a job's page, then delete it from there
    r = await api.http.post("/actions/jobs", **form(action="kill", jid=dead[0], back="/"))
    assert await state_of(api, dead[0]) == "dead"
    r = await api.http.post(
        "/actions/jobs", **form(action="delete", jid=dead[0], back=f"/jobs/{dead[0]}")
    )
    assert r.headers["location"] == "/?done=delete&n=1"
    r = await api.http.post("/actions/jobs", **form(action="explode", jid=dead[0]))
    assert r.status_code == 422


async def test_cancelled_and_skipped_jobs_have_lists_and_waiting_retries_can_be_cancelled(
    api: InProcess,
) -> None:
    retrying = await retrying_job(api, queue="video")
    scheduled = await scheduled_job(api, queue="video")
    for key, jid in (("retries", retrying), ("scheduled", scheduled)):
        assert 'value="cancel"' in (await api.http.get(f"/{key}")).text
        r = await api.http.post("/actions/jobs", **form(action="cancel", jid=jid, back=f"/{key}"))
        assert r.headers["location"] == f"/{key}?done=cancel&n=1"
    r = await api.http.post(
        "/v1/jobs/batch",
        json={"jobs": [
            {"jid": "dash-skip-parent", "jobtype": "P", "ref": "p", "retry": 0},
            {"jid": "dash-skip-child1", "jobtype": "C", "depends_on": ["p"],
             "on_dependency_failure": "skip"},
        ]},
    )  # fmt: skip
    assert r.status_code == 201, r.text
    parent = await fetch_one(api, "default", wid="w-2")
    r = await api.http.post(
        f"/v1/jobs/{parent['jid']}/fail",
        json={"lease": parent["lease"], "errtype": "E", "message": "m"},
    )
    assert r.status_code == 200, r.text
    assert await state_of(api, "dash-skip-child1") == "skipped"
    skipped = (await api.http.get("/skipped")).text
    assert "dash-skip-child1" in skipped and 'value="retry"' in skipped
    cancelled = (await api.http.get("/cancelled")).text
    assert retrying in cancelled and scheduled in cancelled
    r = await api.http.post(
        "/actions/jobs?scope=all", **form(action="delete", list="cancelled", back="/cancelled")
    )
    assert r.headers["location"] == "/cancelled?done=delete&n=2"
    assert [await state_of(api, j) for j in (retrying, scheduled)] == [None, None]


async def test_worker_actions(api: InProcess) -> None:
    await seed(api)
    r = await api.http.post("/actions/workers", **form(action="quiet", wid="w-1"))
    assert r.headers["location"] == "/workers?done=quiet&n=1"
    beat = await api.http.post("/v1/beat", json={"wid": "w-1"})
    assert beat.json()["state"] == "quiet"
    r = await api.http.post("/actions/workers", **form(action="terminate"))
    assert r.headers["location"] == "/workers?done=terminate&n=1"
    assert (await api.http.post("/v1/beat", json={"wid": "w-1"})).json()["state"] == "terminate"


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Referer": "https://evil.example/page"},
        {"Origin": "http://["},  # no URL
        {"Referer": "http://[::1/page"},
        {},  # no evidence at all
    ],
)
async def test_cross_site_posts_are_refused(api: InProcess, headers: dict[str, str]) -> None:
    await push(api, queue="q")
    r = await api.http.post("/actions/queues/q/pause", data={}, headers=headers)
    assert (r.status_code, r.json()["code"]) == (403, "cross_site_request")
    assert r.headers["content-type"] == "application/problem+json"
    assert (await api.http.get("/v1/queues/q")).json()["paused"] is False


async def test_same_origin_by_origin_header_is_accepted(api: InProcess) -> None:
    await push(api, queue="q")
    r = await api.http.post(
        "/actions/queues/q/pause", data={}, headers={"Origin": "http://werk.test"}
    )
    assert r.status_code == 303
    assert (await api.http.get("/v1/queues/q")).json()["paused"] is True


@pytest.fixture
async def secured(make_api: Callable[..., Any]) -> InProcess:
    api: InProcess = await make_api(tokens=TOKENS, auth_failures_per_minute=5)
    return api


async def login(api: InProcess, token: str, next_path: str = "/") -> httpx.Response:
    return await api.http.post("/login", **form(token=token, next=next_path))


async def test_login_session_cookie(secured: InProcess) -> None:
    r = await secured.http.get("/queues?x=1")
    assert r.status_code == 303
    assert r.headers["location"] == "/login?next=%2Fqueues%3Fx%3D1"
    assert (await secured.http.get("/login")).status_code == 200
    r = await login(secured, PUSH)  # valid token, but not admin
    assert r.status_code == 401 and "admin scope" in r.text
    r = await login(secured, "wrong")
    assert r.status_code == 401
    r = await login(secured, ADMIN, "/queues")
    assert r.status_code == 303 and r.headers["location"] == "/queues"
    cookie = r.headers["set-cookie"]
    assert "werk_session=" in cookie and "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert "Path=/" in cookie and "Secure" not in cookie  # plain HTTP here
    assert ADMIN not in cookie
    r = await secured.http.get("/queues")  # the client keeps the cookie
    assert r.status_code == 200 and "Log out" in r.text
    r = await secured.http.post("/logout", headers=SAME_ORIGIN)
    assert r.status_code == 303
    assert (await secured.http.get("/queues")).status_code == 303


async def test_session_cookie_cannot_be_forged(secured: InProcess) -> None:
    await login(secured, ADMIN)
    value = secured.http.cookies["werk_session"]
    name, sid, signature = value.rsplit(".", 2)
    assert name == "ops.team" and len(signature) == 64
    secured.http.cookies.clear()
    other_sid = ("B" if sid[0] == "A" else "A") + sid[1:]
    for forged in (f"{name}.{other_sid}.{signature}", f"root.{sid}.{signature}",
                   f"{name}.{sid}.{'0' * 64}", f"{name}.{sid}", "garbage"):  # fmt: skip
        secured.http.cookies.set("werk_session", forged)
        assert (await secured.http.get("/")).status_code == 303, forged
        secured.http.cookies.clear()
    # API routes do not accept the session cookie (only bearer tokens): no CSRF via the API
    secured.http.cookies.set("werk_session", value)
    assert (await secured.http.get("/")).status_code == 200
    assert (await secured.http.get("/v1/queues")).status_code == 401


async def test_secure_cookie_on_tls(make_api: Callable[..., Any]) -> None:
    api: InProcess = await make_api(tokens=TOKENS)
    async with httpx.AsyncClient(
        transport=api.http._transport, base_url="https://werk.test"
    ) as https:
        r = await https.post("/login", data={"token": ADMIN}, headers=SAME_ORIGIN)
        assert "Secure" in r.headers["set-cookie"]


async def test_failed_logins_are_rate_limited(secured: InProcess) -> None:
    for _ in range(5):
        assert (await login(secured, "guess")).status_code == 401
    r = await login(secured, ADMIN)
    assert r.status_code == 429
    assert "werk_session" not in r.headers.get("set-cookie", "")


async def test_login_redirects_only_to_this_dashboard(secured: InProcess) -> None:
    for evil in ("//evil.example/x", "https://evil.example", "/\\evil.example", "javascript:x"):
        r = await login(secured, ADMIN, evil)
        assert r.headers["location"] == "/", evil


async def test_login_form_is_same_origin_only(secured: InProcess) -> None:
    for headers in (
        {"Sec-Fetch-Site": "cross-site"},
        {"Origin": "https://evil.example"},
        {"Origin": "http://["},
        {"Referer": "http://[::1/login"},
    ):
        r = await secured.http.post("/login", data={"token": ADMIN}, headers=headers)
        assert (r.status_code, r.json()["code"]) == (403, "cross_site_request"), headers
        assert "werk_session" not in r.headers.get("set-cookie", "")


async def test_forwarded_prefix(make_api: Callable[..., Any]) -> None:
    # the in-process client connects from 127.0.0.1: here, a trusted proxy
    secured: InProcess = await make_api(tokens=TOKENS, trusted_proxies=["127.0.0.1"])
    prefixed = {"X-Forwarded-Prefix": "/ops/werk"}
    r = await secured.http.get("/", headers=prefixed)
    assert r.headers["location"] == "/ops/werk/login?next=%2F"
    page = (await secured.http.get("/login", headers=prefixed)).text
    assert 'href="/ops/werk/static/werk.css"' in page
    assert 'action="/ops/werk/login"' in page
    r = await secured.http.post("/login", data={"token": ADMIN},
                                headers={**prefixed, **SAME_ORIGIN})  # fmt: skip
    assert r.headers["location"] == "/ops/werk/"
    assert "Path=/ops/werk/" in r.headers["set-cookie"]
    # an invalid prefix is ignored rather than echoed into links
    page = (await secured.http.get("/login", headers={"X-Forwarded-Prefix": '/x"><b'})).text
    assert 'href="/static/werk.css"' in page


async def test_root_path_setting(make_api: Callable[..., Any]) -> None:
    api: InProcess = await make_api(root_path="/jobs-admin")
    page = (await api.http.get("/")).text
    assert 'href="/jobs-admin/queues"' in page


async def test_job_page_never_shows_the_lease_token(api: InProcess) -> None:
    jid = await push(api, queue="q")
    held = await fetch_one(api, "q")
    page = (await api.http.get(f"/jobs/{jid}")).text
    assert held["wid"] in page and "The job as the API returns it" in page
    assert held["lease"] not in page


async def test_a_completed_job_shows_its_result_and_the_completed_list_has_it(
    api: InProcess,
) -> None:
    r = await api.http.post(
        "/v1/jobs", json={"jobtype": "Report", "jid": "dash-result-1", "keep_result_for": 600}
    )
    assert r.status_code == 201
    job = await fetch_one(api, "default", wid="w-r")
    r = await api.http.post(
        "/v1/jobs/dash-result-1/ack", json={"lease": job["lease"], "result": {"total": XSS}}
    )
    assert r.status_code == 204
    page = (await api.http.get("/jobs/dash-result-1")).text
    assert "Result" in page and "Completed" in page and "600 s after its ack" in page
    assert "total" in page and XSS not in page and "&lt;script&gt;" in page
    assert "dash-result-1" in (await api.http.get("/completed")).text


async def test_expired_tab_and_the_unique_key_and_expiry_on_the_job_page(api: InProcess) -> None:
    expiring = await push(api, queue="mail", jobtype="Late", expires_in=5)
    unique = await push(
        api, queue="mail", jobtype="Once", unique={"key": "nightly-<b>", "for": 600}
    )
    page = (await api.http.get(f"/jobs/{unique}")).text
    assert "nightly-&lt;b&gt;" in page and "holds the lock" in page and "600" in page
    assert "Expires" in (await api.http.get(f"/jobs/{expiring}")).text
    api.clock.advance(6)
    await api.maintain()
    listed = (await api.http.get("/expired")).text
    assert expiring in listed and unique not in listed
    page = (await api.http.get(f"/jobs/{expiring}")).text
    assert "never run" in page and 'value="retry"' in page
    assert expiring in (await api.http.get("/queues/mail?state=expired")).text


async def test_job_page_lists_dependencies_and_dependents_and_the_waiting_tab(
    api: InProcess,
) -> None:
    r = await api.http.post(
        "/v1/jobs/batch",
        json={
            "jobs": [
                {"jid": "dash-dep-parent", "jobtype": "Parent", "ref": "p"},
                {"jid": "dash-dep-child1", "jobtype": "Child", "depends_on": ["p"]},
            ]
        },
    )
    assert r.status_code == 201, r.text
    parent = (await api.http.get("/jobs/dash-dep-parent")).text
    assert "Dependents" in parent and "dash-dep-child1" in parent
    child = (await api.http.get("/jobs/dash-dep-child1")).text
    assert "Dependencies" in child and "dash-dep-parent" in child and "not settled" in child
    assert "Waiting for 1 dependency" in child
    waiting = (await api.http.get("/waiting")).text
    assert "dash-dep-child1" in waiting and "dash-dep-parent" not in waiting
    assert "dash-dep-child1" in (await api.http.get("/queues/default?state=waiting")).text
