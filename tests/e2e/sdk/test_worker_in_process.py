"""``Worker`` used from code (no CLI): handlers, middleware, stop(); and the console script."""

from __future__ import annotations

import asyncio
import gc
import inspect
import json
import subprocess

import httpx

from werk_client import AsyncClient, Client, JobSpec, Registry, Worker

from .workers import REPO, WorkerProcess, lines, wait_for


async def _eventually(check, timeout: float = 20) -> None:
    """Poll ``check`` (plain or async) until it is true, for at most ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        while True:
            result = check()
            if inspect.isawaitable(result):
                result = await result
            if result:
                return
            await asyncio.sleep(0.05)


async def test_worker_from_code_runs_handlers_through_middleware(werk_server):
    registry = Registry()
    seen: list[object] = []
    events: list[tuple[str, str]] = []

    @registry.handler("add")
    async def add(a, b):
        seen.append(a + b)

    @registry.handler("sync_add")
    def sync_add(a, b, *, job):
        seen.append((a + b, job.attempt))

    @registry.handler("misuse")
    async def misuse(*, job):
        job.checkpoint(1)  # the blocking form in an async handler: refused

    lifecycle: list[str] = []

    @registry.on_startup
    async def open_pool():
        lifecycle.append("startup")

    @registry.on_shutdown
    def close_pool():
        lifecycle.append("shutdown")

    async def around(job, call_next):
        events.append(("before", job.jobtype))
        await call_next()
        events.append(("after", job.jobtype))

    async def veto(job, call_next):
        if job.args == ["veto"]:
            raise PermissionError("vetoed by middleware")
        await call_next()

    worker = Worker(
        registry,
        url=werk_server.url,
        concurrency=4,
        fetch_wait=1,
        beat_interval=0.5,
        middleware=[around, veto],
    )
    async with AsyncClient(werk_server.url) as client:
        await client.push("add", [1, 2])
        await client.push("sync_add", [3, 4])
        misused = await client.push("misuse")
        vetoed = await client.push("add", ["veto"])
        running = asyncio.create_task(worker.run_async())

        async def finished() -> bool:
            failed = [await client.get(j.jid) for j in (misused, vetoed)]
            return len(seen) == 2 and all(j.failure is not None for j in failed)

        await _eventually(finished)
        worker.stop()
        await asyncio.wait_for(running, 15)
        assert sorted(map(str, seen)) == ["(7, 1)", "3"]
        assert ("before", "add") in events and ("after", "sync_add") in events
        assert (await client.get(misused.jid)).failure.errtype == "TypeError"
        veto_failure = (await client.get(vetoed.jid)).failure
        assert (veto_failure.errtype, veto_failure.message) == (
            "PermissionError",
            "vetoed by middleware",
        )
        assert worker.processed == 2 and worker.failed == 2
        assert lifecycle == ["startup", "shutdown"]


async def test_a_failing_startup_hook_stops_the_worker_before_it_fetches(werk_server):
    registry = Registry({"add": lambda a, b: a + b})

    @registry.on_startup
    def broken():
        raise RuntimeError("no database")

    async with AsyncClient(werk_server.url) as client:
        job = await client.push("add", [1, 2])
        worker = Worker(registry, url=werk_server.url, fetch_wait=1)
        try:
            await asyncio.wait_for(worker.run_async(), 10)
        except RuntimeError as exc:
            assert str(exc) == "no database"
        else:
            raise AssertionError("the worker started")
        assert (await client.get(job.jid)).state == "available"


def test_console_script_runs_a_worker(werk_server, tmp_path):
    script = REPO / ".venv" / "bin" / "werk-worker"
    help_text = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=30)
    assert help_text.returncode == 0 and "--concurrency" in help_text.stdout

    with Client(werk_server.url) as client:
        client.push("record", ["via-script"])
        with WorkerProcess(
            werk_server.url, tmp_path, "--queues", "critical,default", program=[str(script)]
        ):
            wait_for(lambda: lines(tmp_path, "done.txt"), timeout=30)
        assert lines(tmp_path, "done.txt")[0].startswith("via-script ")


class _CountingTransport(httpx.AsyncHTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []
        self.polling = 0
        self.most_polling = 0  # fetches open at once

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        if request.url.path != "/v1/fetch":
            return await super().handle_async_request(request)
        self.polling += 1
        self.most_polling = max(self.most_polling, self.polling)
        try:
            return await super().handle_async_request(request)
        finally:
            self.polling -= 1


async def test_an_idle_worker_long_polls_instead_of_spinning(werk_server):
    transport = _CountingTransport()
    client = AsyncClient(werk_server.url, transport=transport)
    registry = Registry({"noop": lambda: None})
    worker = Worker(registry, client=client, fetch_wait=1, beat_interval=10, concurrency=20)
    running = asyncio.create_task(worker.run_async())
    await asyncio.sleep(3.5)
    fetches = transport.paths.count("/v1/fetch")
    assert 1 <= fetches <= 6  # one open long poll at a time, renewed every second
    assert transport.most_polling == 1  # an idle worker holds one long poll
    await client.push("noop")
    await _eventually(lambda: worker.processed == 1, timeout=10)
    worker.stop()
    await asyncio.wait_for(running, 15)
    await client.aclose()


class _SizingTransport(httpx.AsyncHTTPTransport):
    """Records how many jobs each fetch asked for and got, and how many each batch ack named."""

    def __init__(self) -> None:
        super().__init__()
        self.fetched: list[tuple[int, int]] = []  # (asked for, got)
        self.acked: list[int] = []
        self.other: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        path = request.url.path
        if path == "/v1/fetch":
            await response.aread()
            asked = json.loads(request.content)["count"]
            self.fetched.append((asked, len(json.loads(response.content)["jobs"])))
        elif path == "/v1/ack":
            self.acked.append(len(json.loads(request.content)["acks"]))
        else:
            self.other.append(path)
        return response


async def test_a_busy_worker_fetches_and_acks_full_batches(werk_server):
    # A backlog costs the server one full fetch and about one batch ack per fetch_size jobs, as
    # the lean client's fetch-100-ack-100 loop does: no fetches for a job or two as slots free
    # up one by one, no acks job by job.
    queue = "full-batches"
    jobs = 3000
    async with AsyncClient(werk_server.url) as producer:
        await producer.push_many(JobSpec("noop", [i], queue=queue) for i in range(jobs))

    async def noop(i: int) -> None:
        pass

    transport = _SizingTransport()
    client = AsyncClient(werk_server.url, transport=transport)
    worker = Worker(
        Registry({"noop": noop}),
        client=client,
        queues=[queue],
        concurrency=200,
        fetch_size=100,
        fetch_wait=1,
        beat_interval=10,
    )
    running = asyncio.create_task(worker.run_async())
    await _eventually(lambda: worker.processed == jobs, timeout=60)
    worker.stop()
    await asyncio.wait_for(running, 15)
    await client.aclose()
    # (A fetch may ask for less than 100 while acks are slow to come back: jobs awaiting theirs
    # count against a second `concurrency`.)
    full = [(asked, got) for asked, got in transport.fetched if got]
    assert sum(got for _, got in full) == jobs
    assert len(full) <= 1.5 * jobs / 100, full
    assert sum(transport.acked) == jobs
    assert len(transport.acked) <= 1.5 * jobs / 100, transport.acked
    assert not [path for path in transport.other if path.endswith("/extend")]


class _HeldAcks(httpx.AsyncHTTPTransport):
    """Holds every ``POST /v1/ack`` until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/ack":
            await self.release.wait()
        return await super().handle_async_request(request)


async def test_a_slot_takes_the_next_job_while_the_last_ack_is_on_its_way(werk_server):
    transport = _HeldAcks()
    client = AsyncClient(werk_server.url, transport=transport)
    started: list[int] = []

    async def note(i: int) -> None:
        started.append(i)

    queue = "slots-while-acking"
    worker = Worker(
        Registry({"note": note}),
        client=client,
        queues=[queue],
        concurrency=1,
        fetch_wait=1,
        beat_interval=10,
    )
    for i in range(3):
        await client.push("note", [i], queue=queue)
    running = asyncio.create_task(worker.run_async())
    # One slot: the second job runs while the first one's ack is held ...
    await _eventually(lambda: len(started) == 2, timeout=10)
    # ... but no third: jobs whose ack is on its way count against a second `concurrency`.
    await asyncio.sleep(1.5)
    assert started == [0, 1] and worker.processed == 0
    transport.release.set()
    await _eventually(lambda: worker.processed == 3, timeout=10)
    worker.stop()
    await asyncio.wait_for(running, 15)
    assert started == [0, 1, 2]
    await client.aclose()


async def test_settled_jobs_are_freed_without_the_cycle_collector(werk_server):
    # A reference cycle per job (the job seen by the handler pointing back at the worker's
    # record of it) leaves every finished job, its task and its record to the cyclic garbage
    # collector, which then takes much of a busy worker's time.
    from werk_client.running import RunningJob

    async def plain() -> None:
        pass

    async def with_job(job) -> None:
        assert job.jid

    queue = "freed-at-once"
    registry = Registry()
    registry.register("plain", plain)
    registry.register("with_job", with_job, with_job=True)
    worker = Worker(registry, url=werk_server.url, queues=[queue], fetch_wait=1, beat_interval=10)
    gc.collect()
    gc.disable()
    try:
        async with AsyncClient(werk_server.url) as client:
            for i in range(10):
                await client.push("with_job" if i % 2 else "plain", queue=queue)
            running = asyncio.create_task(worker.run_async())
            await _eventually(lambda: worker.processed == 10, timeout=10)
            worker.stop()
            await asyncio.wait_for(running, 15)
        alive = sum(isinstance(o, RunningJob) for o in gc.get_objects())
    finally:
        gc.enable()
    assert alive == 0


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no words")


async def test_jobs_settle_whatever_their_handlers_return_or_raise(werk_server):
    """Thirty 60 KB results acked together exceed the server's body limit; a result or an error
    text with a lone surrogate cannot be sent as UTF-8; a result nested past recursion cannot be
    encoded; an exception may not say what it is. Every job is still settled at once."""
    registry = Registry()
    started = 0
    together = asyncio.Event()

    @registry.handler("big")
    async def big():
        nonlocal started
        started += 1
        if started == 30:
            together.set()
        await together.wait()  # all return at once: their acks go in one request
        return "y" * 60_000

    deep: list = []
    for _ in range(5000):
        deep = [deep]
    registry.handler("surrogate")(lambda: "file-\udcff")
    registry.handler("deep")(lambda: deep)

    @registry.handler("surrogate_error")
    def surrogate_error():
        raise ValueError("bad file \udcff")

    @registry.handler("unprintable")
    def unprintable():
        raise _Unprintable

    async with AsyncClient(werk_server.url) as client:
        jobs = [JobSpec("big", queue="settle", keep_result_for=600) for _ in range(30)]
        jobs += [JobSpec(t, queue="settle", keep_result_for=600) for t in ("surrogate", "deep")]
        jobs += [JobSpec(t, queue="settle", retry=-1) for t in ("surrogate_error", "unprintable")]
        await client.push_many(jobs)
        worker = Worker(registry, url=werk_server.url, queues=["settle"], concurrency=40)
        running = asyncio.create_task(worker.run_async())
        try:
            states = {}
            for spec in jobs:
                got = await client.result(spec.jid, wait=20)
                states[spec.jobtype] = states.get(spec.jobtype, set()) | {got.state}
                if spec.jobtype == "big":
                    assert got.result == "y" * 60_000
                elif spec.jobtype in ("surrogate", "deep"):
                    assert got.result is None
        finally:
            worker.stop()
            await running
        assert states == {
            "big": {"completed"},
            "surrogate": {"completed"},
            "deep": {"completed"},
            "surrogate_error": {"dead"},
            "unprintable": {"dead"},
        }
        failed = (await client.get(jobs[-2].jid)).failure
        assert failed is not None and failed.message == "bad file \\udcff"
        failed = (await client.get(jobs[-1].jid)).failure
        assert failed is not None and failed.message == "<_Unprintable whose str() failed>"
        assert (worker.processed, worker.failed) == (32, 2)
