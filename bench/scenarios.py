"""The named scenarios. Each measurement function runs ONE time and returns a dict; the runner
repeats it and summarises (min/median)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import msgspec
import orjson

from bench.httpclient import Connection, open_connections
from bench.procstat import CpuMeter, machine_busy_seconds, rss_bytes
from bench.target import SEED_COMPLETED_SQL, SEED_SEARCHABLE_SQL, Db, Target
from werk_client.jids import new_jid

QUEUE = "bench"


# What the lean client's workers read of a fetch's answer: each job's jid and lease, decoded
# into typed structs; msgspec checks the whole document's syntax but builds no objects for the
# other fields, so the lean client takes as little as it can of the two cores the server and
# PostgreSQL share. What a real worker pays is what the sdk scenario measures.
class Claimed(msgspec.Struct):
    jid: str
    lease: str


class _Fetched(msgspec.Struct):
    jobs: list[Claimed]


class _Acks(msgspec.Struct):
    acks: list[Claimed]


class _AckResult(msgspec.Struct):
    lease_lost: list[str]


_decode_fetched = msgspec.json.Decoder(_Fetched).decode
_decode_ack_result = msgspec.json.Decoder(_AckResult).decode
_encode = msgspec.json.Encoder().encode


async def fetch_claimed(conn: Connection, fetch_body: bytes) -> list[Claimed]:
    return _decode_fetched(await conn.post_raw("/v1/fetch", fetch_body)).jobs


async def ack_claimed(conn: Connection, jobs: list[Claimed]) -> None:
    """One batch ack; every lease must still be current."""
    lost = _decode_ack_result(await conn.post_raw("/v1/ack", _encode(_Acks(jobs)))).lease_lost
    if lost:
        raise RuntimeError(f"lease lost on ack: {lost[:3]}")


@dataclass
class Context:
    target: Target
    jobs: int
    repeat: int
    backlog: int
    dead: int
    in_flight: int
    churn: int
    churn_first: int
    latency_jobs: int
    latency_interval: float
    idle_polls: int
    idle_settle: float
    idle_window: float
    push_clients: list[int]
    batch_sizes: list[int]
    batch_clients: int
    work_workers_1: int
    work_workers_100: int
    churn_producers: int
    churn_workers: int
    pool_max: int = 13  # both pools of one server process
    sample_waits: bool = True
    churn_settle: float = 15.0
    fetch_url: str | None = None
    quiet_wait: float = 0.0
    quiet_threshold: float = 25.0
    completed_rows: int = 1_000_000
    search_jobs: int = 1_000_000
    search_rounds: int = 5
    push_args: str = "[]"  # push-single and push-batch: each job's args (JSON; {n} numbers them)
    # Set while completed jobs seeded for the run stay in the table: resets keep this queue.
    keep_queue: str | None = None
    baselines: dict[str, float] = field(default_factory=dict)

    @classmethod
    def bare(cls, target: Target, jobs: int) -> Context:
        """For scenario functions called one at a time with their own arguments (bench ab, the
        harness's tests): the other scenarios' sizes left at their least, no waiting for a quiet
        machine, no sampling."""
        return cls(
            target=target,
            jobs=jobs,
            repeat=1,
            backlog=0,
            dead=0,
            in_flight=0,
            churn=0,
            churn_first=0,
            latency_jobs=0,
            latency_interval=0.01,
            idle_polls=0,
            idle_settle=0.0,
            idle_window=0.0,
            push_clients=[1],
            batch_sizes=[10],
            batch_clients=1,
            work_workers_1=1,
            work_workers_100=1,
            churn_producers=1,
            churn_workers=1,
            sample_waits=False,
        )

    @property
    def has_db(self) -> bool:
        return self.target.database_url is not None

    def meter(self) -> CpuMeter:
        return CpuMeter(self.target.pid, self.target.pg_uid)

    def db(self) -> Db:
        assert self.target.database_url is not None
        return Db(self.target.database_url)


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


# How many different jobs the pushes cycle through when --push-args numbers them.
PUSH_VARIANTS = 1000


def _args(template: str, n: int) -> Any:
    """The args of job number ``n``: --push-args with each {n} replaced by it."""
    return orjson.loads(template.replace("{n}", str(n)))


def _push_body(queue: str, args: str = "[]", n: int = 0) -> bytes:
    return orjson.dumps({"jobtype": "noop", "args": _args(args, n), "queue": queue})


def _batch_body(queue: str, n: int, args: str = "[]") -> bytes:
    return orjson.dumps(
        {"jobs": [{"jobtype": "noop", "args": _args(args, i), "queue": queue} for i in range(n)]}
    )


async def _connections(ctx: Context, n: int) -> list[Connection]:
    return await open_connections(ctx.target.host, ctx.target.port, n)


def _close(conns: list[Connection]) -> None:
    for c in conns:
        c.close()


async def wait_quiet(ctx: Context) -> float:
    """On a shared machine, wait (up to ``quiet_wait`` seconds) until the cores are mostly idle
    before measuring. Returns the busy share (200 % = two cores) seen in the last second."""
    deadline = time.monotonic() + ctx.quiet_wait
    while True:
        b0, t0 = machine_busy_seconds()
        await asyncio.sleep(1.0)
        b1, t1 = machine_busy_seconds()
        busy = 100 * (os.cpu_count() or 1) * (b1 - b0) / max(t1 - t0, 1e-9)
        if busy <= ctx.quiet_threshold or time.monotonic() >= deadline:
            return round(busy, 1)


async def timed(ctx: Context, run: Callable[[], Awaitable[int]]) -> dict[str, Any]:
    """Runs ``run`` (which returns how many jobs it handled) under the CPU meter."""
    background = await wait_quiet(ctx) if ctx.quiet_wait > 0 else None
    sampler = WaitSampler(ctx) if ctx.has_db and ctx.sample_waits else None
    if sampler is not None:
        await sampler.start()
    meter = ctx.meter()
    meter.start()
    t0 = time.perf_counter()
    try:
        n = await run()
        # The clock and the meter stop before the sampler does: closing its connection is no
        # part of the measured work.
        elapsed = time.perf_counter() - t0
        cpu = meter.stop(elapsed)
    finally:
        waits = await sampler.stop() if sampler is not None else None
    per = max(n, 1)
    # CPU time per job is far less sensitive to other load on a shared machine than jobs/s:
    # it says what a job costs, and so what two idle cores could do at most.
    cost = {k: round(1e6 * cpu[k] / per, 1) for k in ("client", "server", "postgres")}
    return {
        "jobs": n,
        "seconds": round(elapsed, 4),
        "rate": n / elapsed,
        "cpu": cpu,
        "cpu_us_per_job": cost,
        "busy_before_pct": background,
        "pg_waits": waits,
    }


class WaitSampler:
    """Poor man's active session history: every 20 ms, what the server's database sessions are
    doing (on CPU, or waiting, and on what). Shows lock queues and commit (WAL flush) waits."""

    SQL = """SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS w, count(*) AS n
             FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = 'werk'
               AND state = 'active' AND backend_type = 'client backend'
             GROUP BY 1"""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.counts: dict[str, int] = {}
        self.samples = 0

    async def start(self) -> None:
        self.db = ctx_db = self.ctx.db()
        await ctx_db.__aenter__()
        self.task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            for r in await self.db.c.fetch(self.SQL):
                self.counts[r["w"]] = self.counts.get(r["w"], 0) + int(r["n"])
            self.samples += 1
            await asyncio.sleep(0.02)

    async def stop(self) -> dict[str, Any]:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.task
        await self.db.__aexit__(None, None, None)
        n = max(self.samples, 1)
        top = sorted(self.counts.items(), key=lambda kv: -kv[1])[:8]
        # average number of server sessions in each state at any moment
        return {
            "samples": self.samples,
            "avg_active_sessions": {k: round(v / n, 2) for k, v in top},
        }


async def reset(ctx: Context) -> None:
    if ctx.has_db:
        async with ctx.db() as db:
            await db.reset(ctx.keep_queue)


# -- client calibration ---------------------------------------------------------------------


async def livez(ctx: Context, clients: int = 32, requests: int | None = None) -> dict[str, Any]:
    """GET /livez as fast as the pipeline allows: an upper bound of requests/s through uvicorn
    with this client, and the client's own CPU cost per request."""
    total = requests or max(ctx.jobs, 2000)
    conns = await _connections(ctx, clients)
    remaining = total

    async def one(conn: Connection) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            status, _ = await conn.request("GET", "/livez")
            assert status == 200, status

    async def run() -> int:
        await asyncio.gather(*(one(c) for c in conns))
        return total

    try:
        r = await timed(ctx, run)
    finally:
        _close(conns)
    r["client_us_per_request"] = round(1e6 * r["cpu"]["client"] / total, 1)
    return r


# -- producers ------------------------------------------------------------------------------


async def push_single(ctx: Context, clients: int, queue: str = QUEUE) -> dict[str, Any]:
    n = ctx.jobs
    bodies = [_push_body(queue, ctx.push_args, i) for i in range(PUSH_VARIANTS)]
    conns = await _connections(ctx, clients)
    for c in conns:  # warm-up: connections open, statements prepared on the server's pool
        await c.post_raw("/v1/jobs", bodies[0], expect=(201,))
    remaining = n
    lat: list[float] = []

    async def one(conn: Connection) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            t = time.perf_counter()
            await conn.post_raw("/v1/jobs", bodies[remaining % PUSH_VARIANTS], expect=(201,))
            lat.append(time.perf_counter() - t)

    async def run() -> int:
        await asyncio.gather(*(one(c) for c in conns))
        return n

    try:
        r = await timed(ctx, run)
    finally:
        _close(conns)
    r["request_ms"] = {"p50": round(1e3 * pct(lat, 50), 3), "p99": round(1e3 * pct(lat, 99), 3)}
    r["client_us_per_job"] = round(1e6 * r["cpu"]["client"] / n, 1)
    return r


def _sdk_batch_bodies(queue: str, requests: int, batch: int) -> list[bytes]:
    """The bodies the Python SDK's ``push_many`` sends for ``bench.sdk.push``: each job with a
    jid minted as the SDK mints them and args numbering it, so no two requests are the same."""
    return [
        orjson.dumps(
            {
                "jobs": [
                    {"jid": new_jid(), "jobtype": "noop", "args": [r * batch + i], "queue": queue}
                    for i in range(batch)
                ]
            }
        )
        for r in range(requests)
    ]


async def push_batch(
    ctx: Context,
    batch: int,
    clients: int,
    queue: str = QUEUE,
    *,
    minimal: bool = False,
    as_sdk: bool = False,
) -> dict[str, Any]:
    """``minimal``: ask for the short answer (``Prefer: return=minimal``: jids, not jobs).
    ``as_sdk``: send the jobs the sdk scenario pushes through the SDK (a jid and distinct args
    per job; the bodies built before the clock starts), so the two rows compare the clients,
    not different work; else one body, jobs without jids and with --push-args, sent again."""
    requests = max(1, ctx.jobs // batch)
    n = requests * batch
    clients = min(clients, requests)
    if as_sdk:
        bodies = _sdk_batch_bodies(queue, clients + requests, batch)
    else:
        bodies = [_batch_body(queue, batch, ctx.push_args)] * (clients + requests)
    headers = b"Prefer: return=minimal\r\n" if minimal else b""
    conns = await _connections(ctx, clients)
    for c, body in zip(conns, bodies[requests:], strict=True):  # warm-up
        await c.post_raw("/v1/jobs/batch", body, expect=(201,), headers=headers)
    remaining = requests

    async def one(conn: Connection) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await conn.post_raw("/v1/jobs/batch", bodies[remaining], expect=(201,), headers=headers)

    async def run() -> int:
        await asyncio.gather(*(one(c) for c in conns))
        return n

    try:
        r = await timed(ctx, run)
    finally:
        _close(conns)
    r["requests"] = requests
    return r


# -- workers --------------------------------------------------------------------------------


async def seed(ctx: Context, queue: str, n: int, prefix: str = "seed") -> None:
    if ctx.has_db:
        async with ctx.db() as db:
            await db.seed(f"{prefix}-{time.time_ns() % 10**9}-", queue, n)
            await db.c.execute("ANALYZE werk_jobs")
        return
    conn = Connection(ctx.target.host, ctx.target.port)
    body = _batch_body(queue, 1000)
    for _ in range((n + 999) // 1000):
        await conn.post_raw("/v1/jobs/batch", body, expect=(201,))
    conn.close()


async def work(
    ctx: Context, count: int, workers: int, *, queue: str = QUEUE, seed_jobs: bool = True
) -> dict[str, Any]:
    """Fetch + ack through HTTP. count=1 acks each job on its own (POST /v1/jobs/{jid}/ack);
    count>1 acks the whole fetched batch with one POST /v1/ack."""
    n = ctx.jobs
    if seed_jobs:
        await seed(ctx, queue, n)
    conns = await _connections(ctx, workers)
    claimed = 0
    done = 0
    fetch_ms: list[float] = []

    async def one(i: int, conn: Connection) -> None:
        nonlocal claimed, done
        fetch_body = orjson.dumps(
            {"queues": [queue], "wid": f"bench-w{i}", "count": count, "wait": 0}
        )
        while claimed < n:
            t = time.perf_counter()
            jobs = await fetch_claimed(conn, fetch_body)
            fetch_ms.append(time.perf_counter() - t)
            if not jobs:
                return
            claimed += len(jobs)
            if count == 1:
                for j in jobs:
                    await conn.post_raw(
                        f"/v1/jobs/{j.jid}/ack", orjson.dumps({"lease": j.lease}), expect=(204,)
                    )
            else:
                await ack_claimed(conn, jobs)
            done += len(jobs)

    async def run() -> int:
        await asyncio.gather(*(one(i, c) for i, c in enumerate(conns)))
        return done

    try:
        r = await timed(ctx, run)
    finally:
        _close(conns)
    r["fetch_ms"] = {
        "p50": round(1e3 * pct(fetch_ms, 50), 3),
        "p99": round(1e3 * pct(fetch_ms, 99), 3),
    }
    r["client_us_per_job"] = round(1e6 * r["cpu"]["client"] / max(done, 1), 1)
    return r


# -- latency --------------------------------------------------------------------------------


async def latency(ctx: Context, queue: str = "bench-latency") -> dict[str, Any]:
    """One producer pushes a job every ``latency_interval`` seconds; one long-polling fetcher
    (wait=30, count=1) takes them. Latency = fetch response received - push request sent (both
    clocks are this process's perf_counter). Acks go out on a third connection so the fetcher is
    back in its long poll at once."""
    n = ctx.latency_jobs
    producer = Connection(ctx.target.host, ctx.target.port)
    # --fetch-url: the fetcher (and its acks) on another node than the producer, to measure the
    # cross-node wake-up path (NOTIFY/LISTEN) instead of the in-process one
    fhost, fport = ctx.target.host, ctx.target.port
    if ctx.fetch_url:
        parts = urlsplit(ctx.fetch_url)
        fhost, fport = parts.hostname or "127.0.0.1", parts.port or 80
    fetcher = Connection(fhost, fport)
    acker = Connection(fhost, fport)
    for c in (producer, fetcher, acker):
        await c.connect()
    sent: dict[str, float] = {}
    lat: list[float] = []
    push_rtt: list[float] = []
    ack_q: asyncio.Queue[tuple[str, str] | None] = asyncio.Queue()
    fetch_body = orjson.dumps({"queues": [queue], "wid": "bench-latency", "count": 1, "wait": 30})
    got = 0

    async def fetch_loop() -> None:
        nonlocal got
        while got < n:
            jobs = orjson.loads(await fetcher.post_raw("/v1/fetch", fetch_body))["jobs"]
            now = time.perf_counter()
            for j in jobs:
                t0 = sent.get(j["jid"])
                if t0 is not None:
                    lat.append(now - t0)
                got += 1
                ack_q.put_nowait((j["jid"], j["lease"]))

    async def ack_loop() -> None:
        while (item := await ack_q.get()) is not None:
            await acker.post_raw(
                f"/v1/jobs/{item[0]}/ack", orjson.dumps({"lease": item[1]}), expect=(204,)
            )

    async def produce() -> None:
        start = time.perf_counter()
        for i in range(n):
            due = start + i * ctx.latency_interval
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            jid = f"lat-{i:07d}-{time.time_ns() % 10**9}"
            t0 = time.perf_counter()
            sent[jid] = t0
            await producer.post_json(
                "/v1/jobs",
                {"jid": jid, "jobtype": "noop", "args": [], "queue": queue},
                expect=(201,),
            )
            push_rtt.append(time.perf_counter() - t0)

    background = await wait_quiet(ctx) if ctx.quiet_wait > 0 else None
    # warm-up: one job end to end
    await producer.post_json("/v1/jobs", {"jobtype": "noop", "queue": queue}, expect=(201,))
    j = orjson.loads(await fetcher.post_raw("/v1/fetch", fetch_body))["jobs"][0]
    await acker.post_raw(
        f"/v1/jobs/{j['jid']}/ack", orjson.dumps({"lease": j["lease"]}), expect=(204,)
    )
    meter = ctx.meter()
    meter.start()
    t_start = time.perf_counter()
    acks = asyncio.create_task(ack_loop())
    fetching = asyncio.create_task(fetch_loop())
    await produce()
    await asyncio.wait_for(fetching, 60)
    ack_q.put_nowait(None)
    await acks
    elapsed = time.perf_counter() - t_start
    for c in (producer, fetcher, acker):
        c.close()
    ms = [1e3 * x for x in lat]
    return {
        "jobs": n,
        "interval_ms": 1e3 * ctx.latency_interval,
        "p50_ms": round(pct(ms, 50), 3),
        "p90_ms": round(pct(ms, 90), 3),
        "p99_ms": round(pct(ms, 99), 3),
        "max_ms": round(max(ms), 3),
        "mean_ms": round(statistics.fmean(ms), 3),
        "push_rtt_p50_ms": round(1e3 * pct(push_rtt, 50), 3),
        "busy_before_pct": background,
        "seconds": round(elapsed, 3),
        "cpu": meter.stop(elapsed),
    }


# -- idle long polls ------------------------------------------------------------------------


async def idle(ctx: Context, queue: str = "bench-idle") -> dict[str, Any]:
    """``idle_polls`` long polls wait on an empty queue. Measures the server's RSS and CPU and the
    database connections it holds meanwhile."""
    polls = ctx.idle_polls
    wait = ctx.idle_settle + ctx.idle_window + 5
    db_conns_before: dict[str, int] | None = None
    if ctx.has_db:
        async with ctx.db() as db:
            db_conns_before = await db.connections()
    background = await wait_quiet(ctx) if ctx.quiet_wait > 0 else None
    rss_before = rss_bytes(ctx.target.server_pids())
    conns = await _connections(ctx, polls)
    body = orjson.dumps({"queues": [queue], "wid": "bench-idle", "count": 1, "wait": wait})
    tasks = [asyncio.create_task(c.post_raw("/v1/fetch", body)) for c in conns]
    await asyncio.sleep(ctx.idle_settle)
    pending = sum(not t.done() for t in tasks)
    meter = ctx.meter()
    meter.start()
    t0 = time.perf_counter()
    db_conns: list[dict[str, int]] = []
    rss_peak = 0
    rss_proc_peak = 0
    while time.perf_counter() - t0 < ctx.idle_window:
        pids = ctx.target.server_pids()
        rss_peak = max(rss_peak, rss_bytes(pids))
        rss_proc_peak = max([rss_proc_peak, *(rss_bytes([p]) for p in pids)])
        if ctx.has_db:
            async with ctx.db() as db:
                db_conns.append(await db.connections())
        await asyncio.sleep(0.5)
    elapsed = time.perf_counter() - t0
    cpu = meter.stop(elapsed)
    still_pending = sum(not t.done() for t in tasks)
    answers = await asyncio.gather(*tasks, return_exceptions=True)
    errors = [a for a in answers if isinstance(a, BaseException)]
    _close(conns)
    out: dict[str, Any] = {
        "polls": polls,
        "pending_at_start": pending,
        "pending_at_end": still_pending,
        "errors": len(errors),
        "server_processes": len(ctx.target.server_pids()),
        "rss_mb_before": round(rss_before / 2**20, 1),
        "rss_mb": round(rss_peak / 2**20, 1),  # all server processes together
        "rss_mb_largest_process": round(rss_proc_peak / 2**20, 1),
        "server_cpu_pct": cpu["server_pct"],
        "cpu": cpu,
        "window_s": round(elapsed, 2),
        "busy_before_pct": background,
    }
    if errors:
        out["first_error"] = repr(errors[0])[:300]
    if db_conns:
        out["db_connections_before"] = db_conns_before
        out["db_connections_max"] = max(d["total"] for d in db_conns)
        out["db_connections_active_max"] = max(d.get("active", 0) for d in db_conns)
        out["db_connections_samples"] = db_conns[-1]
    return out


# -- churn ----------------------------------------------------------------------------------


async def churn(ctx: Context, queue: str = QUEUE) -> dict[str, Any]:
    """``churn`` jobs through the queue (batch pushes of 1,000 by ``churn_producers`` clients,
    fetch count=100 + batch ack by ``churn_workers`` clients, at most 20,000 outstanding).
    Table and index sizes after the first ``churn_first`` jobs, at the end, and after a 15 s
    pause (autovacuum)."""
    total = ctx.churn
    first_at = ctx.churn_first
    outstanding_max = 20_000
    batch = 1000
    body = _batch_body(queue, batch)
    pushed = 0
    done = 0
    room = asyncio.Event()
    room.set()
    sizes: dict[str, Any] = {}
    producers = await _connections(ctx, ctx.churn_producers)
    workers = await _connections(ctx, ctx.churn_workers)

    async def produce(conn: Connection) -> None:
        nonlocal pushed
        while pushed < total:
            while pushed - done >= outstanding_max:
                room.clear()
                await room.wait()
            k = min(batch, total - pushed)
            if k <= 0:  # the other producers pushed the rest while this one waited
                return
            pushed += k
            await conn.post_raw(
                "/v1/jobs/batch", body if k == batch else _batch_body(queue, k), expect=(201,)
            )

    async def consume(i: int, conn: Connection) -> None:
        nonlocal done
        fetch_body = orjson.dumps(
            {"queues": [queue], "wid": f"bench-churn{i}", "count": 100, "wait": 1}
        )
        while done < total:
            jobs = await fetch_claimed(conn, fetch_body)
            if not jobs:
                continue
            await ack_claimed(conn, jobs)
            done += len(jobs)
            room.set()

    async def watch(db: Db) -> None:
        while done < first_at:
            await asyncio.sleep(0.05)
        sizes["first"] = await db.sizes()
        sizes["first"]["after_jobs"] = done

    async with ctx.db() as db:
        await db.reset(ctx.keep_queue)
        await db.c.execute("VACUUM werk_jobs")
        sizes["start"] = await db.sizes()
        watcher = asyncio.create_task(watch(db))

        async def run() -> int:
            await asyncio.gather(
                *(produce(c) for c in producers), *(consume(i, c) for i, c in enumerate(workers))
            )
            return done

        try:
            r = await timed(ctx, run)
        finally:
            _close(producers)
            _close(workers)
        await watcher
        sizes["end"] = await db.sizes()
        await asyncio.sleep(ctx.churn_settle)
        sizes["settled"] = await db.sizes()
    f, e, s = sizes["first"], sizes["end"], sizes["settled"]
    r["sizes"] = sizes
    r["first_total_kb"] = f["total"] // 1024
    r["end_total_kb"] = e["total"] // 1024
    r["settled_total_kb"] = s["total"] // 1024
    r["start_total_kb"] = sizes["start"]["total"] // 1024
    r["growth_end"] = round(e["total"] / f["total"], 2)
    r["growth_settled"] = round(s["total"] / f["total"], 2)
    return r


# -- backlog --------------------------------------------------------------------------------


async def seed_backlog(ctx: Context, queue: str = QUEUE) -> dict[str, Any]:
    t0 = time.perf_counter()
    async with ctx.db() as db:
        await db.reset()
        await db.seed("backlog-", queue, ctx.backlog)
        await db.seed("dead-", "bench-dead", ctx.dead, dead=True)
        await db.c.execute("VACUUM ANALYZE werk_jobs")
        # The seed's WAL (1,100,000 rows and their index entries) exceeds max_wal_size at its
        # default, and the checkpoints it forced ran back to back, 25-30 s apart, through the
        # backlog runs (work 100 at 0.60 x the empty rate, its sessions waiting on WALWrite).
        # The empty-queue runs start with no checkpoint under way; so do these.
        try:
            await db.c.execute("CHECKPOINT")
        except asyncpg.InsufficientPrivilegeError:
            print("WARNING: no CHECKPOINT after seeding (needs pg_checkpoint)", flush=True)
        explain = await db.explain_claim(queue)
        sizes = await db.sizes()
    return {"seconds": round(time.perf_counter() - t0, 1), "explain": explain, "sizes": sizes}


async def with_timeout(aw: Awaitable[Any], seconds: float) -> Any:
    with contextlib.suppress(asyncio.TimeoutError):
        return await asyncio.wait_for(aw, seconds)
    return None


# -- completed jobs kept with their result ---------------------------------------------------

KEPT_QUEUE = "bench-kept"


async def _checkpoint(db: Db) -> None:
    # A seed's WAL forces checkpoints back to back through the runs that follow (see
    # seed_backlog); the runs compared with it start with none under way.
    try:
        await db.c.execute("CHECKPOINT")
    except asyncpg.InsufficientPrivilegeError:
        print("WARNING: no CHECKPOINT after seeding (needs pg_checkpoint)", flush=True)


async def seed_completed(ctx: Context) -> dict[str, Any]:
    """``completed_rows`` completed jobs kept with their result, in queue bench-kept, written by
    one INSERT ... SELECT; then the claim statement's plan on the table that holds them."""
    t0 = time.perf_counter()
    async with ctx.db() as db:
        await db.reset()
        await db.c.execute(SEED_COMPLETED_SQL, "kept-", KEPT_QUEUE, ctx.completed_rows)
        await db.c.execute("VACUUM ANALYZE werk_jobs, werk_completed_jobs")
        await _checkpoint(db)
        sizes = await db.sizes()
        await db.seed("claimable-", QUEUE, 20_000)  # what the claim's EXPLAIN reads
        explain = await db.explain_claim(QUEUE)
        await db.reset(KEPT_QUEUE)
    return {"seconds": round(time.perf_counter() - t0, 1), "explain": explain, "sizes": sizes}


# -- search ----------------------------------------------------------------------------------

SEARCH_QUEUE = "bench-search"


async def _get(conn: Connection, path: str) -> float:
    t = time.perf_counter()
    status, body = await conn.request("GET", path)
    if status != 200:
        raise RuntimeError(f"GET {path}: {status} {body[:200]!r}")
    return (time.perf_counter() - t) * 1000


async def _search_index(db: Db) -> str:
    """The search index over available jobs (WERK_SEARCH_AVAILABLE), once the build its server
    started is done: absent, valid or invalid."""
    from werk.db import search_index

    for _ in range(600):
        found = await search_index.state(db.c)
        if found is not False:
            break
        await asyncio.sleep(0.5)
    return {None: "absent", True: "valid", False: "invalid"}[found]


async def search(ctx: Context) -> dict[str, Any]:
    """The operators' search (q) over ``search_jobs`` available jobs and a tenth as many
    completed ones kept with their result, seeded with SQL: the API and dashboard answers'
    times, and EXPLAIN ANALYZE of the job list statement for each API query. With
    ``--server-env WERK_SEARCH_AVAILABLE=1`` the available jobs are searched through their index
    (werk_jobs_available_words_idx), which the seeding then fills."""
    from werk.db.admin_queries import job_list_sql

    n = ctx.search_jobs
    kept = max(n // 10, 1)
    t0 = time.perf_counter()
    async with ctx.db() as db:
        await db.reset()
        await db.c.execute(SEED_SEARCHABLE_SQL, "search-", SEARCH_QUEUE, n)
        await db.c.execute(SEED_COMPLETED_SQL, "kept-", KEPT_QUEUE, kept)
        available_index = await _search_index(db)
        await db.c.execute("VACUUM ANALYZE werk_jobs, werk_completed_jobs")
        await _checkpoint(db)
        sizes = await db.sizes()
    seeded = round(time.perf_counter() - t0, 1)
    one, one_kept = n // 2, kept // 2
    # (label, path, the job list's parameters: state, queue, jobtype, q, failed)
    queries: list[tuple[str, str, tuple[Any, ...] | None]] = [
        (
            "api: one available job by args",
            f"/v1/jobs?q=order-{one}&limit=50",
            (None, None, None, f"order-{one}", None),
        ),
        (
            "api: one available job by args, its queue and state",
            f"/v1/jobs?q=order-{one}&queue={SEARCH_QUEUE}&state=available&limit=50",
            ("available", SEARCH_QUEUE, None, f"order-{one}", None),
        ),
        (
            "api: a word of every job (first page)",
            "/v1/jobs?q=order&limit=50",
            (None, None, None, "order", None),
        ),
        (
            "api: one completed job by args",
            f"/v1/jobs?q=order-{one_kept}&state=completed&limit=50",
            ("completed", None, None, f"order-{one_kept}", None),
        ),
        (
            "api: a customer of 1 in 1,000 completed jobs",
            "/v1/jobs?q=c777&state=completed&limit=50",
            ("completed", None, None, "c777", None),
        ),
        (
            "api: a customer of 1 in 1,000 jobs",
            "/v1/jobs?q=c777&limit=50",
            (None, None, None, "c777", None),
        ),
        (
            "dashboard: queue page ?q= one available job",
            f"/queues/{SEARCH_QUEUE}?q=order-{one}",
            None,
        ),
        ("dashboard: /completed?q= one job", f"/completed?q=order-{one_kept}", None),
        ("dashboard: /completed?q= a customer", "/completed?q=c777", None),
        ("dashboard: /dead?q= (no match)", f"/dead?q=order-{one}", None),
    ]
    conn = Connection(ctx.target.host, ctx.target.port)
    rows = []
    try:
        for label, path, params in queries:
            await _get(conn, path)  # the statement prepared, the pages read once
            samples = [await _get(conn, path) for _ in range(ctx.search_rounds)]
            row: dict[str, Any] = {
                "query": label,
                "path": path,
                "p50_ms": round(statistics.median(samples), 1),
                "max_ms": round(max(samples), 1),
            }
            if params is not None:
                async with ctx.db() as db:
                    plan = await db.c.fetch(
                        "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + job_list_sql(True),
                        *params, None, None, 51,
                    )  # fmt: skip
                text = "\n".join(r[0] for r in plan)
                row["explain"] = text
                # The words indexes the statement read (a branch not taken shows no rows).
                row["words_indexes"] = sorted(
                    set(re.findall(r"Bitmap Index Scan on (\w+_words_idx) \(actual", text))
                )
                # The jobs read and left out one by one (the walk over available jobs).
                row["rows_filtered"] = sum(
                    int(line.rsplit(":", 1)[1])
                    for line in text.splitlines()
                    if "Rows Removed by Filter:" in line
                )
                row["execution"] = text.rsplit("Execution Time:", 1)[-1].strip()
            rows.append(row)
    finally:
        conn.close()
    return {
        "jobs": n,
        "completed": kept,
        "seed_seconds": seeded,
        "available_index": available_index,
        "sizes": sizes,
        "rows": rows,
    }
