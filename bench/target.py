"""The server under test: one the harness starts (``werk serve`` against a fresh database), or one
it is pointed at (--url). Also the direct database access the harness needs for seeding, cleaning
up, sizes and EXPLAIN."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from werk.db.migrate import migrate
from werk.db.pool import connect
from werk.db.queries import new_leases

REPO = Path(__file__).resolve().parent.parent
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/"
BENCH_DB = "werk_bench"


def _with_db(url: str, db: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + db, parts.query, parts.fragment))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _reachable(url: str) -> bool:
    try:
        conn = await asyncpg.connect(_with_db(url, "postgres"), timeout=3)
    except Exception:
        return False
    await conn.close()
    return True


async def fresh_database(admin_url: str, name: str = BENCH_DB) -> str:
    """Drop and create ``name`` on the server of ``admin_url``; returns its URL."""
    await drop_databases(admin_url, [name])
    conn = await asyncpg.connect(_with_db(admin_url, "postgres"))
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return _with_db(admin_url, name)


async def drop_databases(admin_url: str, names: list[str]) -> None:
    """Drop ``names`` (those that exist) on the server of ``admin_url``."""
    conn = await asyncpg.connect(_with_db(admin_url, "postgres"))
    try:
        for name in names:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def _werk_executable() -> str:
    exe = Path(sys.executable).parent / "werk"
    if exe.exists():
        return str(exe)
    found = shutil.which("werk")
    if not found:
        raise SystemExit("bench: cannot find the `werk` command (install the project)")
    return found


@dataclass
class Target:
    """Where requests go; ``database_url`` is None when only the HTTP URL is known."""

    url: str
    database_url: str | None
    pid: int | None = None  # the server's root process when the harness started it
    workers: int | None = None
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    pg_uid: int | None = None  # OS user of the PostgreSQL cluster, when it runs on this machine
    notes: list[str] = field(default_factory=list)

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 80

    def server_pids(self) -> list[int]:
        from bench.procstat import process_tree

        return process_tree(self.pid) if self.pid else []

    def stop(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(45)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self.process = None


async def resolve_database(database_url: str | None) -> tuple[str, str]:
    """Returns (database URL for the server, a description). Default: a fresh ``werk_bench``
    database on the local PostgreSQL, else the embedded PostgreSQL (pgserver)."""
    if database_url:
        return database_url, "given"
    if await _reachable(DEFAULT_PG):
        return await fresh_database(DEFAULT_PG), "local PostgreSQL, fresh database werk_bench"
    from werk.embedded import embedded_url, start_embedded

    data_dir = REPO / "bench" / ".pgdata"
    embedded = start_embedded(data_dir)
    url = embedded_url(embedded)
    return await fresh_database(url), f"embedded PostgreSQL in {data_dir}"


def start_server(
    database_url: str,
    workers: int,
    log_dir: Path,
    extra_env: dict[str, str],
    werk: str | None = None,
) -> Target:
    """``werk serve`` (``werk``: another installation's command) on a free port, once ready."""
    port = free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"server-w{workers}-{port}.log"
    env = dict(os.environ)
    env.update(extra_env)
    cmd = [
        werk or _werk_executable(),
        "serve",
        "--port",
        str(port),
        "--database-url",
        database_url,
        "--workers",
        str(workers),
        "--log-level",
        "warning",
    ]
    logf = open(log_path, "wb")  # noqa: SIM115 (kept open for the child's lifetime)
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"bench: werk serve exited ({proc.returncode}); see {log_path}")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=2) as resp:
                if resp.status == 200:
                    break
        except OSError:
            time.sleep(0.2)
    else:
        proc.kill()
        raise SystemExit(f"bench: werk serve did not become ready; see {log_path}")
    if workers > 1:  # every worker process must be up and own its pool before measuring
        time.sleep(2.0)
    return Target(
        url=url,
        database_url=database_url,
        pid=proc.pid,
        workers=workers,
        process=proc,
        log_path=log_path,
    )


# -- direct database work ------------------------------------------------------------------

SEED_SQL = """
INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at, enqueued_at)
SELECT $1 || lpad(g::text, 9, '0'), 'noop', $2, '[]'::jsonb, 'available', now(), now(), now()
FROM generate_series(1, $3::int) AS g
"""

SEED_DEAD_SQL = """
INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at, enqueued_at,
                       attempt, retry_count, failed_at, errtype, message, finished_at)
SELECT $1 || lpad(g::text, 9, '0'), 'noop', $2, '[]'::jsonb, 'dead', now(), now(), now(),
       26, 26, now(), 'BenchError', 'seeded dead job', now()
FROM generate_series(1, $3::int) AS g
"""

# Completed jobs kept with their result (keep_result_for), as results retention leaves them: the
# words of their args and result are those of a job a user would push, not empty; kept a day,
# so no maintenance pass prunes them during a run.
SEED_COMPLETED_SQL = """
INSERT INTO werk_completed_jobs (jid, jobtype, queue, args, custom, state, run_at, created_at,
                                 enqueued_at, attempt, finished_at, keep_result_for, result,
                                 keep_until)
SELECT $1 || lpad(g::text, 9, '0'), 'Report', $2,
       jsonb_build_array('order-' || g, g, jsonb_build_object('customer', 'c' || g % 1000)),
       '{}'::jsonb, 'completed', now(), now(), now(), 1, now(), 86400,
       jsonb_build_object('status', 'ok', 'lines', g % 100), now() + interval '1 day'
FROM generate_series(1, $3::int) AS g
"""

# Available jobs whose args hold words an operator searches for (the `search` scenario).
SEED_SEARCHABLE_SQL = """
INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at, enqueued_at)
SELECT $1 || lpad(g::text, 9, '0'), 'Report', $2,
       jsonb_build_array('order-' || g, g, jsonb_build_object('customer', 'c' || g % 1000)),
       'available', now(), now() - make_interval(secs => $3::int - g), now()
FROM generate_series(1, $3::int) AS g
"""

# Jobs a worker holds (fetched, not yet acked) for an hour.
SEED_HELD_SQL = """
INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at, enqueued_at,
                       attempt, lease, lease_expires_at, wid)
SELECT $1 || lpad(g::text, 9, '0'), 'noop', $2, '[]'::jsonb, 'active', now(), now(), now(),
       1, gen_random_uuid(), now() + interval '1 hour', 'bench-holder'
FROM generate_series(1, $3::int) AS g
"""


async def claim_database(admin_url: str, name: str, jobs: int) -> asyncpg.Connection:
    """A fresh, migrated database ``name`` holding ``jobs`` available jobs in queue "q",
    analyzed, and a connection to it that plans as the server's job pool does (the claim tools:
    ``claim_variants``, ``pg_profile``)."""
    conn = await connect(await fresh_database(admin_url, name))
    try:
        await migrate(conn)
        await conn.execute(SEED_SQL, "job-", "q", jobs)
        await conn.execute("VACUUM ANALYZE werk_jobs")
        await conn.execute("SET plan_cache_mode = force_generic_plan")
    except BaseException:
        await conn.close()
        raise
    return conn


SIZES_SQL = """
SELECT pg_relation_size('werk_jobs') AS heap,
       pg_indexes_size('werk_jobs') AS indexes,
       pg_total_relation_size('werk_jobs') AS total,
       (SELECT json_object_agg(indexrelname, pg_relation_size(indexrelid))
          FROM pg_stat_user_indexes WHERE relname = 'werk_jobs') AS per_index,
       (SELECT n_live_tup FROM pg_stat_user_tables WHERE relname = 'werk_jobs') AS live_tup,
       (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'werk_jobs') AS dead_tup,
       (SELECT autovacuum_count FROM pg_stat_user_tables WHERE relname = 'werk_jobs') AS autovacuums
"""


class Db:
    def __init__(self, url: str) -> None:
        self.url = url
        self.conn: asyncpg.Connection | None = None

    async def __aenter__(self) -> Db:
        self.conn = await asyncpg.connect(
            self.url, server_settings={"application_name": "werk-bench"}
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.conn is not None:
            await self.conn.close()

    @property
    def c(self) -> asyncpg.Connection:
        assert self.conn is not None
        return self.conn

    async def reset(self, keep_queue: str | None = None) -> None:
        """Empty the job table (fast, and it gives every run the same starting point); with
        ``keep_queue``, every job but that queue's, then VACUUM, so the next run starts with no
        dead rows of this one."""
        for attempt in range(20):
            try:
                await self.c.execute("SET lock_timeout = '5s'")
                if keep_queue is None:
                    # (an older server's schema, as bench ab compares, has no werk_completed_jobs)
                    kept = await self.c.fetchval("SELECT to_regclass('werk_completed_jobs')")
                    tables = "werk_jobs, werk_counters" + (", werk_completed_jobs" if kept else "")
                    await self.c.execute(f"TRUNCATE {tables}")
                else:
                    await self.c.execute("DELETE FROM werk_jobs WHERE queue <> $1", keep_queue)
                    await self.c.execute("TRUNCATE werk_counters")
                    await self.c.execute("VACUUM werk_jobs")
                return
            except asyncpg.LockNotAvailableError:
                await asyncio.sleep(0.5 * (attempt + 1))
        raise RuntimeError("could not truncate werk_jobs")

    async def seed(
        self, prefix: str, queue: str, n: int, *, dead: bool = False, held: bool = False
    ) -> None:
        sql = SEED_DEAD_SQL if dead else SEED_HELD_SQL if held else SEED_SQL
        step = 200_000
        done = 0
        while done < n:
            k = min(step, n - done)
            await self.c.execute(sql, f"{prefix}{done // step:03d}-", queue, k)
            done += k

    async def count(self, queue: str, state: str = "available") -> int:
        return int(
            await self.c.fetchval(
                "SELECT count(*) FROM werk_jobs WHERE queue = $1 AND state = $2::werk_job_state",
                queue,
                state,
            )
        )

    async def sizes(self) -> dict[str, object]:
        row = await self.c.fetchrow(SIZES_SQL)
        import json

        d = dict(row)
        d["per_index"] = json.loads(d["per_index"]) if d["per_index"] else {}
        return d

    async def settings(self) -> dict[str, str]:
        out = {}
        for name in (
            "server_version",
            "synchronous_commit",
            "fsync",
            "full_page_writes",
            "shared_buffers",
            "wal_level",
            "max_connections",
            "autovacuum",
            "effective_io_concurrency",
            "work_mem",
            "random_page_cost",
        ):
            out[name] = await self.c.fetchval(f"SHOW {name}")
        out["version"] = await self.c.fetchval("SELECT version()")
        return out

    async def backend_uid(self) -> int | None:
        from bench.procstat import uid_of

        return uid_of(int(await self.c.fetchval("SELECT pg_backend_pid()")))

    async def connections(self) -> dict[str, int]:
        rows = await self.c.fetch(
            "SELECT coalesce(state, '?') AS state, count(*) AS n FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = 'werk' GROUP BY 1"
        )
        d = {r["state"]: int(r["n"]) for r in rows}
        d["total"] = sum(d.values())
        return d

    async def explain_claim(self, queue: str) -> dict[str, object]:
        """EXPLAIN (ANALYZE, BUFFERS) of the claim statement as the server runs it, in a
        transaction that is rolled back; once with a custom plan and once with the generic plan a
        prepared statement settles on after five executions."""
        sql_text = (REPO / "server" / "werk" / "db" / "sql" / "job_fetch.sql").read_text()
        out: dict[str, object] = {}
        for mode in ("force_custom_plan", "force_generic_plan"):
            tr = self.c.transaction()
            await tr.start()
            try:
                await self.c.execute(f"SET LOCAL plan_cache_mode = {mode}")
                rows = await self.c.fetch(
                    "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql_text,
                    None,
                    [queue],
                    ["bench-explain"] * 100,
                    new_leases(100),
                )
            finally:
                await tr.rollback()
            plan = "\n".join(r[0] for r in rows)
            out[mode] = plan
        custom = str(out["force_custom_plan"])
        generic = str(out["force_generic_plan"])
        out["uses_claim_index"] = all("werk_jobs_claim_idx" in p for p in (custom, generic))
        return out
