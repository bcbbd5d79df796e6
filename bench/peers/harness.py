"""Runs the peer drivers and reports them side by side.

Each driver is a long-lived process holding one queue library (producer and worker in that
process) and answering JSON commands on stdin, one JSON line per answer on stdout. The harness
empties the peer's tables before every command (outside the clock), reads the CPU of PostgreSQL
and of the Werk server around it, and takes each rate from the driver's own clock. Every driver
runs from start to end, and each row is taken of every peer in turn before the next row, so drift
on a shared machine falls on all of them alike.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import asyncpg

from bench import scenarios
from bench.peers import toolchains
from bench.procstat import CpuMeter
from bench.scenarios import Context
from bench.target import fresh_database

BATCH = 1000
# Before the latency run's first push: the worker has started and is waiting (LISTEN or a long
# poll) on an empty queue.
SETTLE_MS = 1000


# The processed row's settings are the best of a sweep on the reference machine (drain 10,000
# no-op jobs): PgQueuer batch_size 10 / 100 / 500 / 1,000, pg-boss localConcurrency 1 / 2 / 4 / 8
# (batchSize 100), Graphile Worker concurrency 10 / 24 / 50 (localQueue 500), Werk concurrency
# 50 / 200 / 500 / 1,000 (fetch batch 100: more fetches in flight share each claim statement).


@dataclass
class Peer:
    name: str
    # the processed row's worker settings, and the latency row's (an idle worker)
    work: dict[str, Any]
    latency: dict[str, Any]
    # what the processed column says about ``work``
    setting: str
    database: str | None = None  # its own fresh database; None: Werk (the harness's server)
    reset_sql: str = ""
    left_sql: str = ""  # jobs still not done after the worker stopped
    dsn: str = field(default="", init=False)


def _werk(name: str) -> Peer:
    """Werk through one of its clients (all take the same worker settings)."""
    return Peer(
        name,
        work={"concurrency": 1000, "fetchBatch": 100},
        latency={"concurrency": 10, "fetchWait": 30},
        setting="Worker concurrency 1,000, fetch batch 100",
        left_sql="SELECT count(*) FROM werk_jobs",
    )


PEERS = [
    _werk("werk-py"),
    _werk("werk-ts"),
    _werk("werk-go"),
    Peer(
        "pgqueuer",
        work={"batch_size": 1000},
        latency={"batch_size": 10},
        setting="QueueManager batch_size 1000",
        database="pgqueuer",
        reset_sql="TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics",
        left_sql="SELECT count(*) FROM pgqueuer",
    ),
    Peer(
        "pg-boss",
        work={"batchSize": 100, "localConcurrency": 4, "burstWhenBatchFull": True},
        latency={"localConcurrency": 2},
        setting="work() batchSize 100, localConcurrency 4, burstWhenBatchFull",
        database="pgboss",
        reset_sql="TRUNCATE pgboss.job",
        left_sql="SELECT count(*) FROM pgboss.job WHERE state <> 'completed'",
    ),
    Peer(
        "graphile-worker",
        work={
            "concurrency": 24,
            "maxPoolSize": 26,
            "localQueue": {"size": 500},
            "completeJobBatchDelay": 0,
        },
        latency={"concurrency": 1},
        setting="concurrency 24, localQueue 500, completeJobBatchDelay 0",
        database="graphile",
        reset_sql="TRUNCATE graphile_worker._private_jobs",
        left_sql="SELECT count(*) FROM graphile_worker._private_jobs",
    ),
]
NAMES = [p.name for p in PEERS]

# (key, column title, unit)
ROWS = [
    ("push1", "push, 1 at a time", "jobs/s"),
    ("push8", "push, 8 in flight", "jobs/s"),
    ("batch", f"batches of {BATCH:,}", "jobs/s"),
    ("work", "processed", "jobs/s"),
    ("latency", "push→handler p50 / p99", "ms"),
]


def _command(peer: Peer, ctx: Context) -> list[str]:
    """The driver's command line (built, installed first when needed)."""
    options: dict[str, Any] = {"work": peer.work, "latency": peer.latency}
    if peer.database is None:
        options["url"] = ctx.target.url
    else:
        options["dsn"] = peer.dsn
    arg = json.dumps(options)
    if peer.name == "werk-go":
        return [toolchains.go_driver(), arg]
    if peer.name == "werk-py":
        return [sys.executable, str(toolchains.HERE / "werk_driver.py"), arg]
    if peer.name == "pgqueuer":
        return [toolchains.pgqueuer_python(), str(toolchains.HERE / "pgqueuer_driver.py"), arg]
    node = toolchains.node()
    if peer.name == "werk-ts":
        toolchains.typescript_client()
    adapter = {"werk-ts": "werk", "pg-boss": "pgboss", "graphile-worker": "graphile"}[peer.name]
    return [node, str(toolchains.NODE_DIR / "driver.mjs"), adapter, arg]


class Driver:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, cmd: list[str]) -> tuple[Driver, dict[str, Any]]:
        proc = await asyncio.create_subprocess_exec(
            *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        driver = cls(proc)
        hello = await driver._read(timeout=120)
        return driver, hello

    async def _read(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            raise RuntimeError(f"the driver exited ({await self.proc.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def ask(self, command: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(command) + "\n").encode())
        await self.proc.stdin.drain()
        answer = await self._read(timeout=900)
        if not answer.get("ok"):
            raise RuntimeError(f"driver command {command} failed: {answer.get('error')}")
        return answer

    async def close(self) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(b'{"cmd": "exit"}\n')
            await self.proc.stdin.drain()
            await asyncio.wait_for(self.proc.wait(), 60)
        except (TimeoutError, ConnectionError):
            self.proc.kill()
            await self.proc.wait()


async def _sql(dsn: str, statement: str) -> Any:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("SET lock_timeout = '10s'")
        return await conn.fetchval(statement)
    finally:
        await conn.close()


class PeerRun:
    """One driver process of one peer, asked for one row at a time."""

    def __init__(self, ctx: Context, peer: Peer) -> None:
        self.ctx = ctx
        self.peer = peer
        self.dsn = peer.dsn or (ctx.target.database_url or "")
        self._driver: Driver | None = None

    @property
    def driver(self) -> Driver:
        assert self._driver is not None, "start() first"
        return self._driver

    async def reset(self) -> None:
        if self.peer.database is None:
            await scenarios.reset(self.ctx)
        else:
            await _sql(self.dsn, self.peer.reset_sql)

    def meter(self) -> CpuMeter:
        server = self.ctx.target.pid if self.peer.database is None else None
        return CpuMeter(server, self.ctx.target.pg_uid)

    async def measured(self, command: dict[str, Any]) -> dict[str, Any]:
        meter = self.meter()
        meter.start()
        t0 = time.perf_counter()
        answer = await self.driver.ask(command)
        cpu = meter.stop(time.perf_counter() - t0)
        jobs = max(int(answer["jobs"]), 1)
        answer["cpu_us_per_job"] = {
            "driver": round(1e6 * answer["driver_cpu_s"] / jobs, 1),
            "server": round(1e6 * cpu["server"] / jobs, 1),
            "postgres": round(1e6 * cpu["postgres"] / jobs, 1),
        }
        answer["other_load_pct"] = cpu["other_pct"]
        if "seconds" in answer:
            answer["rate"] = answer["jobs"] / max(answer["seconds"], 1e-9)
        return answer

    async def start(self) -> dict[str, Any]:
        """Starts the driver and runs every row once, unmeasured, on the fresh process: a JIT's
        warm-up (Node's) and the first connections stay out of the figures for every peer
        alike, as they are out of the Python SDK's, whose process is long running. Returns the
        versions the driver reports."""
        c = self.ctx
        self._driver, hello = await Driver.start(_command(self.peer, c))
        for key in ("push1", "push8", "batch"):
            await self.reset()
            await self.driver.ask(self._command(key))
        await self.reset()
        await self.driver.ask({"cmd": "seed", "jobs": c.jobs, "size": BATCH})
        await self.driver.ask(self._command("work"))
        versions: dict[str, Any] = hello["versions"]
        return versions

    def _command(self, key: str) -> dict[str, Any]:
        """Each row over the same number of jobs as the Python SDK's rows of the same run."""
        c = self.ctx
        return {
            "push1": {"cmd": "push", "jobs": c.jobs, "inflight": 1},
            "push8": {"cmd": "push", "jobs": c.jobs, "inflight": 8},
            "batch": {"cmd": "batch", "jobs": c.jobs, "size": BATCH},
            "work": {"cmd": "work", "jobs": c.jobs},
            "latency": {
                "cmd": "latency",
                "jobs": c.latency_jobs,
                "interval_ms": c.latency_interval * 1e3,
                "settle_ms": SETTLE_MS,
            },
        }[key]

    async def row(self, key: str) -> dict[str, Any]:
        """One row measured (``key`` of ROWS), on tables emptied first; the processed row's
        jobs are pushed before its clock starts."""
        await self.reset()
        if key == "work":
            await self.driver.ask({"cmd": "seed", "jobs": self.ctx.jobs, "size": BATCH})
        out = await self.measured(self._command(key))
        if key == "work":
            out["left"] = int(await _sql(self.dsn, self.peer.left_sql))
        return out

    async def close(self) -> None:
        if self._driver is not None:
            await self._driver.close()


def _range(values: list[float], fmt: Callable[[float], str]) -> str:
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}-{fmt(hi)}"


def _rate(x: float) -> str:
    return f"{x:,.0f}"


def _ms(x: float) -> str:
    return f"{x:.1f}"


def table(peers: list[Peer], runs: dict[str, list[dict[str, Any]]]) -> str:
    """Markdown: jobs/s (min-max over the runs) and latency; then CPU per job, medians."""
    head = "| " + " | ".join(["peer", *(title for _, title, _ in ROWS), "processed with"]) + " |"
    lines = [head, "|" + "---|" * (len(ROWS) + 2)]
    for peer in peers:
        got = runs.get(peer.name) or []
        if not got:
            continue
        cells = [peer.name]
        for key, _, _ in ROWS:
            if key == "latency":
                p50 = _range([r[key]["p50_ms"] for r in got], _ms)
                p99 = _range([r[key]["p99_ms"] for r in got], _ms)
                cells.append(f"{p50} / {p99} ms")
            else:
                cells.append(_range([r[key]["rate"] for r in got], _rate))
        cells.append(peer.setting)
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "CPU µs per job, medians (driver / werk server / PostgreSQL):", ""]
    lines += ["| peer | " + " | ".join(t for _, t, _ in ROWS[:4]) + " |", "|---|---|---|---|---|"]
    for peer in peers:
        got = runs.get(peer.name) or []
        if not got:
            continue
        cells = [peer.name]
        for key, _, _ in ROWS[:4]:
            med = {
                k: statistics.median(r[key]["cpu_us_per_job"][k] for r in got)
                for k in ("driver", "server", "postgres")
            }
            cells.append(f"{med['driver']:.0f} / {med['server']:.0f} / {med['postgres']:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def beside_python(runs: dict[str, list[dict[str, Any]]]) -> str:
    """Markdown: Werk's TypeScript and Go clients against its Python SDK, row by row, each run
    paired with the Python run of the same round (the same row of both taken one after the
    other, so a shared machine's drift falls on both). A ratio of 1 or more is at or above
    Python: a rate over Python's, or Python's p50 latency over theirs. Empty without werk-py."""
    python = {r["round"]: r for r in runs.get("werk-py", [])}
    clients = [name for name in ("werk-ts", "werk-go") if runs.get(name)]
    if not python or not clients:
        return ""
    lines = [
        "Beside the Python SDK, run by run (median of the rounds' ratios; at or above it in how"
        " many rounds):",
        "",
        "| client | "
        + " | ".join("push→handler p50" if key == "latency" else t for key, t, _ in ROWS)
        + " |",
        "|---|" + "---|" * len(ROWS),
    ]
    for name in clients:
        paired = [(r, python[r["round"]]) for r in runs[name] if r["round"] in python]
        cells = [name]
        for key, _, _ in ROWS:
            if key == "latency":
                ratios = [py[key]["p50_ms"] / r[key]["p50_ms"] for r, py in paired]
            else:
                ratios = [r[key]["rate"] / py[key]["rate"] for r, py in paired]
            at_least = sum(x >= 1 for x in ratios)
            cells.append(f"{statistics.median(ratios):.2f} x ({at_least} of {len(ratios)})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def run(
    ctx: Context,
    names: list[str],
    record: Callable[[dict[str, Any], str], None],
    database_prefix: str = "bench_",
) -> dict[str, list[dict[str, Any]]]:
    """Every peer in ``names``, ``ctx.repeat`` rounds; one record per peer. Every driver runs
    from start to end; in a round each row is taken of every peer in turn before the next row,
    so a row's figures are seconds apart, not a whole run of the other peers. Each other queue
    gets a fresh database ``database_prefix + its name`` on the server of
    ``ctx.target.database_url``."""
    peers = [replace(p) for p in PEERS if p.name in names]
    admin = ctx.target.database_url
    assert admin is not None
    for peer in peers:
        if peer.database is not None:
            peer.dsn = await fresh_database(admin, database_prefix + peer.database)
        # build and install before anything is measured
        await asyncio.to_thread(_command, peer, ctx)
    runs: dict[str, list[dict[str, Any]]] = {p.name: [] for p in peers}
    failures: dict[str, list[str]] = {p.name: [] for p in peers}

    def failed(peer: Peer, error: Exception) -> None:  # recorded and shown; the others go on
        failures[peer.name].append(repr(error))
        print(f"{'peers':<12} {peer.name:<16} FAILED: {error!r}", flush=True)

    started: list[tuple[PeerRun, dict[str, Any]]] = []
    try:
        for peer in peers:
            peer_run = PeerRun(ctx, peer)
            try:
                started.append((peer_run, await peer_run.start()))
            except Exception as error:
                failed(peer, error)
                await peer_run.close()
        for round_ in range(ctx.repeat):
            busy = await scenarios.wait_quiet(ctx) if ctx.quiet_wait > 0 else None
            taken = {
                d.peer.name: {"versions": v, "busy_before_pct": busy, "round": round_}
                for d, v in started
            }
            for key, _, _ in ROWS:
                for peer_run, _ in started:
                    r = taken.get(peer_run.peer.name)
                    if r is None:
                        continue
                    try:
                        r[key] = await peer_run.row(key)
                    except Exception as error:
                        failed(peer_run.peer, error)
                        del taken[peer_run.peer.name]
            for name, r in taken.items():
                runs[name].append(r)
                lat = r["latency"]
                print(
                    f"{'peers':<12} {name:<16} run {round_ + 1}/{ctx.repeat}  "
                    + "  ".join(f"{k}={r[k]['rate']:,.0f}/s" for k, _, _ in ROWS[:4])
                    + f"  latency p50={lat['p50_ms']:.2f} p99={lat['p99_ms']:.2f} ms"
                    + f"  (left after work: {r['work']['left']})",
                    flush=True,
                )
    finally:
        for peer_run, _ in started:
            await peer_run.close()
    for peer in peers:
        got = runs[peer.name]
        record(
            {
                "scenario": "peers",
                "variant": peer.name,
                "name": f"peers {peer.name}",
                "params": {
                    "jobs": ctx.jobs,
                    "batch": BATCH,
                    "latency_jobs": ctx.latency_jobs,
                    "latency_interval_ms": ctx.latency_interval * 1e3,
                    "work": peer.work,
                    "latency": peer.latency,
                },
                "versions": got[0]["versions"] if got else {},
                "runs": got,
                "failures": failures[peer.name],
            },
            f"{'peers':<12} {peer.name:<16} {len(got)} runs recorded, "
            f"{len(failures[peer.name])} failed",
        )
    print("\n" + table(peers, runs) + "\n", flush=True)
    beside = beside_python(runs)
    if beside:
        print(beside + "\n", flush=True)
    return runs
