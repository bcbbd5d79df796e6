"""Bearer tokens and scopes on every route; 401/403/429 as problem+json; the bind rule."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from tests.conftest import InProcess
from tests.support.server import clean_env
from werk.config import Settings

TOKENS = {
    "push": "push-token-0123456789",
    "work": "work-token-0123456789",
    "admin": "admin-token-0123456789",
    "metrics": "metrics-token-0123456789",
}
CONFIG = [
    # one by plaintext (hashed at start-up), the others by their SHA-256 only
    {"name": "producer", "token": TOKENS["push"], "scopes": ["push"]},
    {"name": "worker", "sha256": hashlib.sha256(TOKENS["work"].encode()).hexdigest(),
     "scopes": ["work"]},
    {"name": "ops", "sha256": hashlib.sha256(TOKENS["admin"].encode()).hexdigest().upper(),
     "scopes": ["admin"]},
    {"name": "prometheus", "sha256": hashlib.sha256(TOKENS["metrics"].encode()).hexdigest(),
     "scopes": ["metrics"]},
]  # fmt: skip

# operationId -> the scopes that may call it (admin may call everything); None = open.
EXPECTED: dict[str, set[str] | None] = {
    "jobs-push": {"push"},
    "jobs-push-batch": {"push"},
    "jobs-get": {"push", "work"},
    "jobs-result": {"push", "work"},
    "jobs-dependencies": {"push", "work"},
    "work-fetch": {"work"},
    "batches-new": {"push"},
    "batches-open": {"push"},
    "batches-commit": {"push"},
    "batches-get": {"push", "work"},
    "work-ack": {"work"},
    "work-ack-batch": {"work"},
    "work-fail": {"work"},
    "work-extend": {"work"},
    "work-beat": {"work"},
    "system-info": set(),
    "system-livez": None,
    "system-readyz": None,
    "system-metrics": {"metrics"},
}


def bearer(scope: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[scope]}"}


@pytest.fixture
async def secured(make_api: Callable[..., Any]) -> InProcess:
    api: InProcess = await make_api(tokens=CONFIG, auth_failures_per_minute=1000)
    return api


def operations(api: InProcess) -> list[tuple[str, str, str]]:
    app = api.http._transport.app  # type: ignore[attr-defined]
    found = []
    for path, ops in app.openapi()["paths"].items():
        for method, op in ops.items():
            concrete = (
                path.replace("{jid}", "abcdefgh-0001")
                .replace("{queue}", "q")
                .replace("{wid}", "w1")
                .replace("{bid}", "b-abcdefgh")
            )
            found.append((op["operationId"], method.upper(), concrete))
    return found


def expected_scopes(operation_id: str) -> set[str] | None:
    if operation_id.startswith("admin-"):
        return set()  # admin only
    assert operation_id in EXPECTED, (
        f"{operation_id}: a new route must declare who may call it (add it to EXPECTED and "
        "give its router an authorize(...) dependency in app.py)"
    )
    return EXPECTED[operation_id]


async def call(api: InProcess, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    body = {} if method in ("POST", "PUT", "PATCH") else None
    return await api.http.request(method, path, json=body, headers=headers)


async def test_every_route_and_every_scope(secured: InProcess) -> None:
    ops = operations(secured)
    assert len(ops) > 20
    for operation_id, method, path in ops:
        allowed = expected_scopes(operation_id)
        anonymous = await call(secured, method, path, {})
        if allowed is None:
            assert anonymous.status_code not in (401, 403), operation_id
            continue
        assert anonymous.status_code == 401, (operation_id, anonymous.text)
        assert anonymous.headers["content-type"] == "application/problem+json"
        assert anonymous.json()["code"] == "unauthorized"
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        wrong = await call(secured, method, path, {"Authorization": "Bearer not-a-token"})
        assert wrong.status_code == 401, operation_id
        for scope in TOKENS:
            r = await call(secured, method, path, bearer(scope))
            if scope == "admin" or scope in allowed:
                assert r.status_code not in (401, 403), (operation_id, scope, r.text)
            else:
                assert r.status_code == 403, (operation_id, scope, r.status_code)
                assert r.json()["code"] == "forbidden"
                assert r.headers["content-type"] == "application/problem+json"


async def test_scoped_tokens_do_real_work(secured: InProcess) -> None:
    r = await secured.http.post("/v1/jobs", json={"jobtype": "A"}, headers=bearer("push"))
    assert r.status_code == 201
    jid = r.json()["jid"]
    r = await secured.http.post(
        "/v1/fetch", json={"queues": ["default"], "wid": "w"}, headers=bearer("work")
    )
    (job,) = r.json()["jobs"]
    r = await secured.http.post(
        f"/v1/jobs/{jid}/ack", json={"lease": job["lease"]}, headers=bearer("work")
    )
    assert r.status_code == 204
    r = await secured.http.get("/v1/history", params={"days": 1}, headers=bearer("admin"))
    assert r.json()["days"][0]["processed"] == 1


async def test_the_api_description_is_for_token_holders(secured: InProcess) -> None:
    anonymous = await secured.http.get("/openapi.json")
    assert anonymous.status_code == 401
    assert anonymous.json()["code"] == "unauthorized"
    for scope in TOKENS:
        described = await secured.http.get("/openapi.json", headers=bearer(scope))
        assert described.status_code == 200, scope
        assert "/v1/jobs" in described.json()["paths"]
    # The docs pages would fetch the description without a token: they are off.
    for page in ("/docs", "/redoc"):
        assert (await secured.http.get(page, headers=bearer("admin"))).status_code == 404


async def test_no_tokens_means_open(api: InProcess) -> None:
    assert (await api.http.get("/v1/queues")).status_code == 200
    assert (await api.http.get("/metrics")).status_code == 200
    for page in ("/openapi.json", "/docs", "/redoc"):
        assert (await api.http.get(page)).status_code == 200, page


async def test_metrics_can_be_public(make_api: Callable[..., Any]) -> None:
    api: InProcess = await make_api(tokens=CONFIG, metrics_public=True)
    assert (await api.http.get("/metrics")).status_code == 200
    assert (await api.http.get("/v1/queues")).status_code == 401


async def test_failed_attempts_are_rate_limited(make_api: Callable[..., Any]) -> None:
    api: InProcess = await make_api(tokens=CONFIG, auth_failures_per_minute=3)
    for _ in range(3):
        r = await api.http.get("/v1/queues", headers={"Authorization": "Bearer guess"})
        assert r.status_code == 401
    r = await api.http.get("/v1/queues", headers=bearer("admin"))
    assert r.status_code == 429  # blocked, even with a good token, until the window passes
    assert r.json()["code"] == "too_many_auth_failures"
    assert int(r.headers["retry-after"]) > 0
    assert (await api.http.get("/livez")).status_code == 200


def test_public_bind_without_tokens_is_refused() -> None:
    with pytest.raises(ValidationError, match="werk token"):
        Settings(host="0.0.0.0", database_url="postgresql://x/y")
    assert Settings(host="0.0.0.0", insecure=True).insecure
    assert Settings(host="0.0.0.0", tokens=CONFIG).auth_enabled
    assert Settings(host="::1").binds_loopback


def test_token_config_is_validated_and_hashed() -> None:
    s = Settings(tokens=CONFIG)
    assert all(t.token is None for t in s.tokens)  # the plaintext is not kept
    assert s.tokens[0].sha256 == hashlib.sha256(TOKENS["push"].encode()).hexdigest()
    with pytest.raises(ValidationError):
        Settings(tokens=[{"name": "x", "scopes": ["push"]}])  # neither token nor hash
    with pytest.raises(ValidationError):
        Settings(tokens=[{"name": "x", "token": TOKENS["push"], "scopes": ["root"]}])
    with pytest.raises(ValidationError) as info:
        Settings(tokens=[{"name": "x", "token": "short-secret", "scopes": ["push"]}])
    assert "short-secret" not in str(info.value)  # secrets stay out of error messages


def test_cli_refuses_public_bind_and_says_how_to_fix(tmp_path: Any) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "werk.cli", "serve", "--host", "0.0.0.0",
         "--database-url", "postgresql://127.0.0.1:1/none"],
        env=clean_env(), capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode != 0
    assert "WERK_TOKENS" in result.stderr and "--insecure" in result.stderr


def test_cli_generates_tokens() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "werk.cli", "token", "--name", "ci", "--scope", "push"],
        env=clean_env(), capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    lines = result.stdout.splitlines()
    token = lines[0].rsplit(" ", 1)[1]
    assert hashlib.sha256(token.encode()).hexdigest() in lines[1]


async def test_real_server_with_tokens_from_the_environment(
    werk_server_factory: Callable[..., Any],
) -> None:
    import json

    server = werk_server_factory(env={"WERK_TOKENS": json.dumps(CONFIG[:3])})
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.post("/v1/jobs", json={"jobtype": "A"})).status_code == 401
        r = await http.post("/v1/jobs", json={"jobtype": "A"}, headers=bearer("push"))
        assert r.status_code == 201
        assert (await http.get("/v1/queues", headers=bearer("push"))).status_code == 403
        assert (await http.get("/v1/queues", headers=bearer("admin"))).status_code == 200
        assert (await http.get("/readyz")).status_code == 200
