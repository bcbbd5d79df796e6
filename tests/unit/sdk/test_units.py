"""Pure unit tests: wire mapping, retries over a scripted transport, registry, config."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import types
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from werk_client import (
    AsyncClient,
    Client,
    Forbidden,
    JobNotFound,
    JobSpec,
    LeaseLost,
    NoRetry,
    Registry,
    ResultTooLarge,
    RetryIn,
    RetryPolicy,
    ServerError,
    Unauthorized,
    Unavailable,
    ValidationError,
    WerkError,
    WorkerConfig,
)
from werk_client.errors import error_from_response
from werk_client.failures import describe_failure
from werk_client.worker_cli import load_registry

FAST_RETRY = RetryPolicy(attempts=4, base=0.001, cap=0.002)

JOB = {
    "jid": "0123456789abcdef",
    "jobtype": "t",
    "args": [],
    "queue": "default",
    "priority": 0,
    "reserve_for": 1800,
    "retry": 25,
    "backtrace": 0,
    "custom": {},
    "at": None,
    "state": "available",
    "created_at": "2026-01-01T00:00:00Z",
    "enqueued_at": "2026-01-01T00:00:00+00:00",
    "attempt": 0,
    "progress": None,
    "failure": None,
    "lease": None,
    "lease_expires_at": None,
    "wid": None,
    "some_future_field": 1,
}


def problem(status: int, code: str | None, detail: str = "x", **more) -> httpx.Response:
    body = {"type": "about:blank", "title": "t", "status": status, "detail": detail, **more}
    if code is not None:
        body["code"] = code
    return httpx.Response(status, json=body, headers={"content-type": "application/problem+json"})


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (404, "job_not_found", JobNotFound),
        (409, "lease_lost", LeaseLost),
        (422, "invalid_request", ValidationError),
        (400, "invalid_json", ValidationError),
        (400, "malformed_request", ValidationError),
        (413, "result_too_large", ResultTooLarge),
        (401, "ambiguous_credentials", Unauthorized),
        (429, "too_many_auth_failures", Unauthorized),
        (403, "cross_site_request", Forbidden),
        (503, "database_unavailable", Unavailable),
        (500, "internal_error", ServerError),
        (404, None, JobNotFound),
        (502, None, Unavailable),
        (418, None, WerkError),
        (409, "queue_paused", WerkError),
    ],
)
def test_error_mapping(status, code, cls):
    error = error_from_response(problem(status, code, errors=[{"loc": "jobs.3", "message": "m"}]))
    assert type(error) is cls
    assert error.status == status and error.detail == "x"
    assert error.code == (code or error.code) and error.code
    assert error.errors == [{"loc": "jobs.3", "message": "m"}] and "jobs.3" in str(error)


def test_models_parse_times_and_ignore_unknown_fields():
    from werk_client import JobRecord

    record = JobRecord.from_wire(JOB)
    assert record.created_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert record.enqueued_at is not None and record.enqueued_at.tzinfo is not None


def test_job_spec_wire_form():
    spec = JobSpec("t", [1], queue="q", at=timedelta(seconds=30))
    wire = spec.to_wire()
    assert set(wire) == {"jid", "jobtype", "args", "queue", "at"}
    assert datetime.fromisoformat(wire["at"]) > datetime.now(UTC)
    assert JobSpec("t").jid != JobSpec("t").jid and len(JobSpec("t").jid) == 28
    with pytest.raises(ValueError):
        JobSpec("t", at=datetime(2030, 1, 1))


def test_a_job_spec_is_encoded_as_it_stands():
    """A spec is its own push body: construction puts each field in its wire form, so what
    msgspec encodes is what ``to_wire`` shows, the unset fields left out."""
    import msgspec

    from werk_client import Unique

    first = JobSpec("a")
    spec = JobSpec(
        "t",
        (1, 2),
        at=timedelta(seconds=30),
        unique=Unique(for_=60, by=("args.0",)),
        depends_on=[first, "stored-jid"],
        custom={"timeout": 5},
    )
    wire = spec.to_wire()
    assert msgspec.json.decode(msgspec.json.encode(spec)) == wire
    assert wire["args"] == [1, 2] and wire["depends_on"] == [first.jid, "stored-jid"]
    assert wire["unique"] == {"for": 60, "by": ["args.0"]}
    assert 25 < datetime.fromisoformat(wire["at"]).timestamp() - time.time() <= 30
    assert set(wire) == {"jobtype", "args", "at", "custom", "jid", "unique", "depends_on"}
    assert JobSpec("t", unique={"key": "k"}).to_wire()["unique"] == {"key": "k"}


def test_retry_delay_is_capped_and_jittered():
    policy = RetryPolicy(attempts=5, base=0.5, cap=2.0)
    delays = [policy.delay(n) for n in range(10) for _ in range(20)]
    assert all(0 <= d <= 2.0 for d in delays) and len(set(delays)) > 10
    assert policy.delay(0, retry_after=1.5) >= 1.5
    assert policy.delay(0, retry_after=60) <= 2.0


def test_push_is_retried_on_503_and_connect_errors_with_the_same_jid():
    seen: list[dict] = []
    answers = iter(["connect", 503, 502, 201])

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        answer = next(answers)
        if answer == "connect":
            raise httpx.ConnectError("refused", request=request)
        if answer != 201:
            return problem(answer, "database_unavailable" if answer == 503 else None)
        return httpx.Response(201, json={**JOB, "jid": seen[-1]["jid"]})

    with Client("http://werk.test", retry=FAST_RETRY, transport=httpx.MockTransport(handler)) as c:
        job = c.push("t", [1])
    assert len(seen) == 4 and len({body["jid"] for body in seen}) == 1
    assert job.jid == seen[0]["jid"]


def test_retries_give_up_with_a_typed_error():
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    transport = httpx.MockTransport(refuse)
    with (
        Client("http://werk.test", retry=FAST_RETRY, transport=transport) as c,
        pytest.raises(Unavailable) as info,
    ):
        c.info()
    assert info.value.status is None and "ConnectError" in str(info.value)


def test_client_errors_are_not_retried_and_fetch_is_not_repeated_after_a_lost_answer():
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if request.url.path == "/v1/fetch":
            raise httpx.ReadError("connection reset", request=request)
        return problem(422, "invalid_request")

    with Client("http://werk.test", retry=FAST_RETRY, transport=httpx.MockTransport(handler)) as c:
        with pytest.raises(ValidationError):
            c.push("t")
        assert calls["n"] == 1
        with pytest.raises(Unavailable):
            c.fetch(["default"], wid="w")
        assert calls["n"] == 2


def test_url_and_token_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("WERK_URL", "http://from-env:1234/")
    monkeypatch.setenv("WERK_TOKEN", "s3cret")
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(201, json=JOB)

    with Client(transport=httpx.MockTransport(handler)) as c:
        c.push("t")
    assert str(seen[0].url) == "http://from-env:1234/v1/jobs"
    assert seen[0].headers["authorization"] == "Bearer s3cret"
    assert seen[0].headers["user-agent"].startswith("werk-client-python/")


async def test_async_client_retries_too():
    answers = iter([503, 200])

    async def handler(request: httpx.Request) -> httpx.Response:
        answer = next(answers)
        if answer == 503:
            return problem(503, "database_unavailable")
        return httpx.Response(200, json={"state": "quiet"})

    transport = httpx.MockTransport(handler)
    async with AsyncClient("http://werk.test", retry=FAST_RETRY, transport=transport) as c:
        assert await c.beat("w") == "quiet"


def test_registry_calling_conventions():
    registry = Registry()

    @registry.handler("plain")
    def plain(a, b):
        return a + b

    @registry.handler("keyword")
    def keyword(a, *, job):
        return (a, job)

    @registry.handler(with_job=True)
    async def whole(job):
        return job

    assert plain(1, 2) == 3  # the decorator returns the function unchanged
    job = object()
    assert registry.get("plain").call([1, 2], job) == 3
    assert registry.get("keyword").call([1], job) == (1, job)
    assert registry.get("whole").is_async and registry.get("whole").style == "job"
    assert registry.jobtypes == ["keyword", "plain", "whole"] and "plain" in registry
    with pytest.raises(ValueError):
        registry.register("plain", plain)
    assert Registry({"x": plain}).get("x").style == "args"


def _raise(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_failure_reports_honour_retry_signals():
    report = describe_failure(_raise(KeyError("k")), 5)
    assert (report.errtype, report.message) == ("KeyError", "'k'")
    assert report.backtrace[-1] == "KeyError: 'k'" and len(report.backtrace) <= 5
    assert describe_failure(_raise(RetryIn(30)), 5).retry_in == 30
    assert describe_failure(_raise(RetryIn(0)), 5).errtype == "RetryIn"
    buried = describe_failure(_raise(NoRetry("bad input")), 5)
    assert (buried.retry, buried.errtype, buried.message) == (False, "NoRetry", "bad input")
    try:
        try:
            int("x")
        except ValueError as exc:
            raise NoRetry() from exc
    except NoRetry as signal:
        caused = describe_failure(signal, 3)
    assert caused.errtype == "ValueError" and "invalid literal" in caused.message
    assert describe_failure(_raise(ValueError("m")), 0).backtrace == []


def test_worker_config_reads_env_and_validates(monkeypatch):
    monkeypatch.setenv("WERK_BEAT_INTERVAL", "0.5")
    monkeypatch.setenv("WERK_QUEUES", "critical, default")
    config = WorkerConfig.from_env(concurrency=3)
    assert (config.beat_interval, config.queues, config.concurrency) == (
        0.5,
        ("critical", "default"),
        3,
    )
    assert WorkerConfig.from_env(queues="a,b").queues == ("a", "b")
    with pytest.raises(ValueError):
        WorkerConfig(extend_fraction=0.5)
    with pytest.raises(TypeError):
        WorkerConfig.from_env(no_such_option=1)


def test_load_registry_finds_registry_handlers_mapping_or_named_attribute(monkeypatch):
    module = types.ModuleType("sdk_fake_jobs")
    module.handlers = {"a": lambda: None}
    module.other = Registry({"b": lambda: None})
    monkeypatch.setitem(sys.modules, "sdk_fake_jobs", module)
    registry, name = load_registry("sdk_fake_jobs")
    assert registry.jobtypes == ["a"] and name == "sdk_fake_jobs"
    assert load_registry("sdk_fake_jobs:other")[0].jobtypes == ["b"]
    with pytest.raises(SystemExit, match="no attribute"):
        load_registry("sdk_fake_jobs:missing")
    with pytest.raises(SystemExit, match="cannot import"):
        load_registry("no_such_module_anywhere")


def test_failure_reports_are_kept_within_the_server_limits():
    from werk_client.failures import FailureReport

    report = FailureReport("E" * 500, "m\x00" * 10_000, ["x" * 50_000] * 5000).sanitized()
    assert len(report.errtype) == 200 and "\x00" not in report.message
    assert len(report.message) <= 4000
    assert len(report.backtrace) == 1000 and all(len(line) <= 2000 for line in report.backtrace)


async def test_acks_completing_together_share_a_request():
    from werk_client.acks import AckBatcher

    requests: list[list[str]] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        acks = json.loads(request.content)["acks"]
        requests.append([a["jid"] for a in acks])
        await asyncio.sleep(0.01)
        jids = [a["jid"] for a in acks]
        return httpx.Response(
            200,
            json={
                "acked": [j for j in jids if j != "stale"],
                "lease_lost": [j for j in jids if j == "stale"],
            },
        )

    outcomes: dict[str, bool] = {}
    async with AsyncClient("http://werk.test", transport=httpx.MockTransport(handler)) as client:
        batcher: AckBatcher[str] = AckBatcher(
            client.ack_many, lambda jid, acked, error: outcomes.setdefault(jid, acked)
        )
        jids = [f"job{i}" for i in range(20)] + ["stale"]
        for jid in jids:
            batcher.add(jid, "lease", None, jid)
            await asyncio.sleep(0.001)
        await batcher.drained()
    assert outcomes == {**{j: True for j in jids[:20]}, "stale": False}
    assert sorted(j for r in requests for j in r) == sorted(jids)  # each acked exactly once
    assert 1 < len(requests) < 5  # the first alone, the rest together


def test_a_string_is_not_taken_for_a_list_of_arguments():
    with pytest.raises(TypeError):
        JobSpec("t", "abc")
    transport = httpx.MockTransport(lambda r: httpx.Response(500))
    with Client("http://werk.test", transport=transport) as c, pytest.raises(TypeError):
        c.push("t", "abc")


def _settler(handler, *, shutting_down: bool = False, batch_ack: bool = False):
    """A ``Settler`` over a scripted transport, and a leased job for it to settle."""
    import logging

    from werk_client.lease_keeper import LeaseKeeper
    from werk_client.models import JobRecord
    from werk_client.retry import NO_RETRY
    from werk_client.running import RunningJob
    from werk_client.settler import Settler

    log = logging.getLogger("werk_client.worker")
    client = AsyncClient("http://werk.test", retry=NO_RETRY, transport=httpx.MockTransport(handler))
    keeper = LeaseKeeper(client, asyncio.get_running_loop(), 1 / 3, log, on_lost=lambda run: None)
    record = JobRecord.from_wire({**JOB, "state": "active", "attempt": 1, "lease": "L1"})
    settler = Settler(client, batch_ack=batch_ack, shutting_down=lambda: shutting_down, log=log)
    return client, settler, RunningJob(record, None, keeper, log)


async def test_an_ack_rides_out_an_outage_and_is_given_up_sooner_while_shutting_down(caplog):
    from werk_client.failures import FailureReport

    caplog.set_level("INFO", logger="werk_client.worker")
    answers = [problem(503, "database_unavailable"), problem(503, "database_unavailable")]
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if answers:
            return answers.pop(0)
        return httpx.Response(200, json={"acked": [JOB["jid"]], "lease_lost": []})

    client, settler, run = _settler(handler, batch_ack=True)
    async with client:
        assert await settler.ack(run) is True
    assert seen == ["/v1/ack"] * 3 and "job done" in caplog.text

    seen.clear()
    client, settler, run = _settler(
        lambda r: seen.append(r.url.path) or problem(503, "database_unavailable"),
        shutting_down=True,
    )
    async with client:
        assert await settler.ack(run) is False
        assert await settler.fail(run, FailureReport("E", "m", [])) is False
    ack_path, fail_path = f"/v1/jobs/{JOB['jid']}/ack", f"/v1/jobs/{JOB['jid']}/fail"
    assert seen == [ack_path] * 3 + [fail_path] * 3
    assert "ack failed" in caplog.text and "could not report failure" in caplog.text


async def test_a_refused_failure_report_is_sent_again_without_its_details(caplog):
    from werk_client.failures import FailureReport

    bodies: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        if len(bodies) == 1:
            return problem(422, "invalid_request")
        return httpx.Response(200, json={"jid": JOB["jid"], "state": "scheduled"})

    client, settler, run = _settler(handler)
    async with client:
        assert await settler.fail(run, FailureReport("Boom", "details", ["line"])) is True
    assert [b["message"] for b in bodies] == [
        "details",
        "(the failure details were refused by the server)",
    ]
    assert bodies[1]["backtrace"] == [] and bodies[1]["errtype"] == "Boom"

    bodies.clear()
    client, settler, run = _settler(
        lambda r: bodies.append(json.loads(r.content)) or problem(422, "invalid_request")
    )
    async with client:
        assert await settler.fail(run, FailureReport("Boom", "details", ["line"])) is False
    assert len(bodies) == 2 and "server refused the failure report" in caplog.text


async def test_one_timer_extends_each_lease_when_its_own_extension_is_due():
    import logging

    from werk_client.lease_keeper import LeaseKeeper
    from werk_client.models import JobRecord
    from werk_client.running import RunningJob

    extended: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        jid = request.url.path.split("/")[3]
        extended.append(jid)
        return httpx.Response(200, json={"jid": jid, "lease_expires_at": "2030-01-01T00:00:00Z"})

    log = logging.getLogger("werk_client.worker")
    client = AsyncClient("http://werk.test", transport=httpx.MockTransport(handler))
    keeper = LeaseKeeper(client, asyncio.get_running_loop(), 0.004, log, on_lost=lambda run: None)

    def running(jid: str, reserve_for: int) -> RunningJob:
        record = JobRecord.from_wire(
            {**JOB, "jid": jid, "reserve_for": reserve_for, "state": "active", "lease": jid}
        )
        return RunningJob(record, None, keeper, log)

    slow, fast = running("slow-job", 1800), running("fast-job", 60)  # every 7.2 s / 0.24 s
    async with client:
        keeper.watch(slow)  # the timer is set for the slow job's extension ...
        keeper.watch(fast)  # ... and brought forward for the fast one's
        await asyncio.sleep(0.65)
        keeper.release(fast)
        keeper.release(slow)
        count = len(extended)
        await asyncio.sleep(0.3)
    assert extended.count("fast-job") >= 2 and "slow-job" not in extended
    assert len(extended) == count  # released: no more extensions


def test_jids_grow_and_stay_unique_across_threads():
    """Client jids have the server's growing form, so a batch's keys sit side by side in the
    job table's primary key; threads minting at once never get the same one."""
    from concurrent.futures import ThreadPoolExecutor

    from werk_client import new_jid

    def mint(_: int) -> list[str]:
        return [new_jid() for _ in range(2000)]

    with ThreadPoolExecutor(4) as pool:
        minted = [jid for part in pool.map(mint, range(4)) for jid in part]
    assert len(set(minted)) == len(minted)
    assert all(len(j) == 28 and int(j, 16) >= 0 for j in minted)
    one = mint(0)
    assert one == sorted(one)
    # The milliseconds since the epoch above the random part.
    assert abs((int(one[0], 16) >> 68) / 1e3 - datetime.now(UTC).timestamp()) < 60


def test_forked_child_does_not_continue_the_parents_jids():
    """Parent and child counting on from the same last jid would mint the same jids."""
    import os

    from werk_client import jids, new_jid

    new_jid()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os.write(write, str(jids._count.start).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child_start = os.read(read, 100).decode()
    os.close(read)
    os.close(write)
    assert child_start != str(jids._count.start)


async def test_a_failed_read_of_left_out_dependency_results_fails_the_attempt():
    """The worker reads the results a fetch left out before the handler runs; when that read
    fails, the attempt fails as a handler's error would (and is retried), the handler unrun."""
    import logging

    from werk_client.lease_keeper import LeaseKeeper
    from werk_client.models import Dependency, JobRecord
    from werk_client.runner import Runner
    from werk_client.running import RunningJob

    registry = Registry()
    ran = []

    @registry.handler("whole")
    async def whole():
        ran.append(True)

    async def unreachable(jid, *, after=None):
        raise Unavailable(f"ConnectError: reading {jid} after {after}", code="unreachable")

    log = logging.getLogger("test")
    keeper = LeaseKeeper(None, asyncio.get_running_loop(), 1 / 3, log, on_lost=lambda run: None)
    runner = Runner(
        registry, [], WorkerConfig(), url="http://x", token=None, preload=(),
        read_dependencies=unreachable,
    )  # fmt: skip
    deps = [Dependency("a", result=1), Dependency("b", result_omitted=True)]
    run = RunningJob(JobRecord("j", "whole", dependencies=deps), registry.get("whole"), keeper, log)
    try:
        report = await runner.run(run)
    finally:
        runner.close()
    assert report is not None and report.errtype == "Unavailable"
    assert "reading j after a" in report.message and not ran
