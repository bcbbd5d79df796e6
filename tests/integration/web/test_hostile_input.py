"""Input the dashboard cannot use is refused with a 4xx problem and changes nothing, and
X-Forwarded-* headers count only from a configured proxy (issue 28, defects 7 and 8)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from tests.conftest import InProcess
from tests.integration.admin.support import dead_job, push, state_of
from tests.integration.web.test_dashboard import ADMIN, SAME_ORIGIN, TOKENS, form, seed
from tests.integration.web.test_sessions import TOKENS_ENV
from tests.support.server import ServerProcess


def assert_refused(r: httpx.Response, status: int = 422) -> None:
    assert r.status_code == status, r.text[:300]
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["code"] == "invalid_request"


@pytest.mark.parametrize(
    "query",
    [
        "done=retry&n=%C2%B2",
        "done=retry&n=" + "9" * 5000,
        "done=kill&n=-1",
        "done=delete&n=1e3",
    ],
)
async def test_a_message_count_that_is_no_count_is_refused(
    make_api: Callable[..., Any], query: str
) -> None:
    api: InProcess = await make_api()
    for page in ("/queues", "/dead"):
        assert_refused(await api.http.get(f"{page}?{query}"))
    secured: InProcess = await make_api(tokens=TOKENS)
    assert_refused(await secured.http.get(f"/login?{query}"))
    r = await api.http.get("/dead?done=retry&n=12")
    assert r.status_code == 200 and "12 job(s) queued to run now." in r.text


@pytest.mark.parametrize(
    "page",
    ["/retries?q=a%00", "/dead?cursor=a%00b", "/queues/mail%00?state=dead",
     "/queues/mail?state=dead%00", "/jobs/abc%00defg", "/workers?cursor=%00", "/login?next=/%00"],
)  # fmt: skip
async def test_nul_in_a_page_request_is_refused(api: InProcess, page: str) -> None:
    await seed(api)
    assert_refused(await api.http.get(page))


async def test_nul_in_an_action_is_refused_and_changes_nothing(api: InProcess) -> None:
    jobs = await seed(api)
    dead = jobs["dead"]
    for action in ("retry", "kill", "delete"):
        r = await api.http.post(
            "/actions/jobs", **form(action=action, jid=[dead, "abc\x00defg"], back="/dead")
        )
        assert_refused(r)
        r = await api.http.post(
            "/actions/jobs?scope=all", **form(action=action, state="dead", queue="mail\x00")
        )
        assert_refused(r)
    assert await state_of(api, dead) == "dead"
    assert_refused(await api.http.post("/actions/workers", **form(action="quiet", wid="w\x00")))
    assert_refused(await api.http.post("/actions/workers", **form(action="quiet\x00")))
    assert (await api.http.post("/v1/beat", json={"wid": "w-1"})).json()["state"] == "running"
    assert_refused(await api.http.post("/actions/queues/mail%00/pause", **form()))
    assert_refused(await api.http.post("/actions/queues/mail/pause", **form(back="/\x00")))
    assert (await api.http.get("/v1/queues/mail")).json()["paused"] is False


def big_form(fields: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "content": urlencode(fields),
        "headers": {**SAME_ORIGIN, "Content-Type": "application/x-www-form-urlencoded"},
    }


async def test_a_form_with_too_many_fields_is_refused(make_api: Callable[..., Any]) -> None:
    api: InProcess = await make_api()
    dead = await dead_job(api)
    jids = [("jid", dead)] + [("jid", f"x{i:07}") for i in range(5000)]
    assert_refused(await api.http.post("/actions/jobs", **big_form([("action", "delete"), *jids])))
    assert await state_of(api, dead) == "dead"
    # multipart (the dashboard posts only urlencoded forms): refused without being parsed
    r = await api.http.post(
        "/actions/jobs", data={"action": "delete", "jid": dead},
        files=[("f", ("f", b"x"))] * 6000, headers=SAME_ORIGIN,
    )  # fmt: skip
    assert_refused(r)
    assert await state_of(api, dead) == "dead"
    # a login form that large logs nobody in
    secured: InProcess = await make_api(tokens=TOKENS)
    r = await secured.http.post("/login", **big_form([("token", ADMIN)] + [("x", "1")] * 5001))
    assert_refused(r)
    assert "werk_session" not in r.headers.get("set-cookie", "")


# -- X-Forwarded-* -------------------------------------------------------------------------
# The in-process client connects from 127.0.0.1.

AUTH = {"Authorization": f"Bearer {ADMIN}"}
EVIL_HOST = {"Origin": "https://evil.example", "X-Forwarded-Host": "evil.example"}


async def login_via(api: InProcess, headers: dict[str, str], token: str = ADMIN) -> httpx.Response:
    api.http.cookies.clear()
    return await api.http.post("/login", data={"token": token}, headers={**SAME_ORIGIN, **headers})


@pytest.mark.parametrize("trusted", [[], ["10.0.0.0/8", "::1"]])
async def test_forwarded_headers_from_other_clients_count_for_nothing(
    make_api: Callable[..., Any], trusted: list[str]
) -> None:
    api: InProcess = await make_api(
        tokens=TOKENS, trusted_proxies=trusted, auth_failures_per_minute=3
    )
    await push(api, headers=AUTH, queue="q")
    await login_via(api, {})
    r = await api.http.post("/actions/queues/q/pause", data={}, headers=EVIL_HOST)
    assert r.status_code == 403 and r.json()["code"] == "cross_site_request"
    assert (await api.http.get("/v1/queues/q", headers=AUTH)).json()["paused"] is False
    page = (await api.http.get("/queues", headers={"X-Forwarded-Prefix": "/evil"})).text
    assert 'href="/queues"' in page and "/evil" not in page
    r = await login_via(api, {"X-Forwarded-Proto": "https"})
    assert r.status_code == 303 and "Secure" not in r.headers["set-cookie"]
    # a client cannot dodge the failure limit by naming another address each time
    for i in range(3):
        r = await login_via(api, {"X-Forwarded-For": f"203.0.113.{i}"}, token="wrong")
        assert r.status_code == 401
    assert (await login_via(api, {"X-Forwarded-For": "203.0.113.99"})).status_code == 429


async def test_a_trusted_proxy_names_the_host_scheme_prefix_and_client(
    make_api: Callable[..., Any],
) -> None:
    api: InProcess = await make_api(
        tokens=TOKENS, trusted_proxies=["127.0.0.0/8"], auth_failures_per_minute=3
    )
    await push(api, headers=AUTH, queue="q")
    via = {"X-Forwarded-Host": "werk.example", "X-Forwarded-Proto": "https",
           "X-Forwarded-Prefix": "/ops"}  # fmt: skip
    r = await login_via(api, via)
    assert r.headers["location"] == "/ops/"
    assert "Secure" in r.headers["set-cookie"] and "Path=/ops/" in r.headers["set-cookie"]
    api.http.cookies.set("werk_session", api.http.cookies["werk_session"])  # on every path
    origin = {"Origin": "https://werk.example", "X-Forwarded-Host": "werk.example"}
    r = await api.http.post("/actions/queues/q/pause", data={}, headers=origin)
    assert r.status_code == 303
    assert (await api.http.get("/v1/queues/q", headers=AUTH)).json()["paused"] is True
    cross = {"Origin": "https://evil.example", "X-Forwarded-Host": "werk.example"}
    r = await api.http.post("/actions/queues/q/resume", data={}, headers=cross)
    assert r.status_code == 403
    assert (await api.http.get("/v1/queues/q", headers=AUTH)).json()["paused"] is True
    # failures count per client behind the proxy, read from the right past our proxies
    for _ in range(3):
        bad = {"X-Forwarded-For": "203.0.113.9, 203.0.113.5, 127.0.0.2"}
        assert (await login_via(api, bad, token="wrong")).status_code == 401
    assert (await login_via(api, {"X-Forwarded-For": "203.0.113.5"})).status_code == 429
    assert (await login_via(api, {"X-Forwarded-For": "203.0.113.9"})).status_code == 303


def test_a_server_ignores_forwarded_headers_by_default(
    werk_server_factory: Callable[..., ServerProcess],
) -> None:
    """uvicorn would believe X-Forwarded-For and -Proto from any loopback client; Werk only from
    WERK_TRUSTED_PROXIES."""
    env = {"WERK_TOKENS": TOKENS_ENV, "WERK_AUTH_FAILURES_PER_MINUTE": "2"}
    server = werk_server_factory(env)
    for i in range(2):
        r = httpx.post(server.url + "/login", data={"token": "wrong"},
                       headers={**SAME_ORIGIN, "X-Forwarded-For": f"203.0.113.{i}"})  # fmt: skip
        assert r.status_code == 401
    r = httpx.post(server.url + "/login", data={"token": ADMIN},
                   headers={**SAME_ORIGIN, "X-Forwarded-For": "203.0.113.7"})  # fmt: skip
    assert r.status_code == 429
