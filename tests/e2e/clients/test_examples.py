"""The examples of "Enqueue and complete inside your transaction" (examples/), run as they are
documented: against a real server, as an application's login role that holds werk_app and may
create its own tables. Each pushes a job in its business transaction and completes it in the
transaction of its side effect; the test checks both rows and that the job is gone (acked)."""

from __future__ import annotations

import secrets
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from tests.e2e.clients.toolchains import ROOT, go_env, node_ready, run, skip_loudly
from tests.support.database import as_user
from tests.support.helpers import sql
from tests.support.server import ServerProcess

EXAMPLES = ROOT / "examples"
PGX_INSTALL = "apt-get install -y golang-github-jackc-pgx-v4-dev"
DEBIAN_GOPATH = Path("/usr/share/gocode")


@pytest.fixture
async def app_role(database_url: str) -> AsyncIterator[str]:
    role = f"werk_test_app_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(database_url)
    try:
        await admin.execute(f"CREATE ROLE {role} LOGIN IN ROLE werk_app")
        await admin.execute(f"GRANT CREATE ON SCHEMA public TO {role}")
        yield role
    finally:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role
        )
        await admin.execute(f"DROP OWNED BY {role}")
        await admin.execute(f"DROP ROLE {role}")
        await admin.close()


@pytest.fixture
def server(werk_server_factory) -> ServerProcess:
    return werk_server_factory()  # type: ignore[no-any-return]


async def check_done(database_url: str, effect: str) -> None:
    """The business row, its effect, and no job left (acked)."""
    assert len(await sql(database_url, f"SELECT * FROM {effect}")) == 1
    assert await sql(database_url, "SELECT jid FROM werk_jobs") == []
    (row,) = await sql(
        database_url, "SELECT sum(pushed)::int AS p, sum(processed)::int AS d FROM werk_counters"
    )
    assert (row["p"], row["d"]) == (1, 1)


@pytest.mark.parametrize(
    ("script", "scheme", "effect"),
    [
        ("outbox_psycopg.py", "postgresql", "receipts"),
        ("outbox_sqlalchemy.py", "postgresql+psycopg", "welcomes"),
    ],
)
async def test_python_examples(server, database_url, app_role, script, scheme, effect):
    dsn = as_user(database_url, app_role).replace("postgresql", scheme, 1)
    env = {"WERK_URL": server.url, "DATABASE_URL": dsn, "PATH": ""}
    out = run([sys.executable, str(EXAMPLES / "python" / script)], EXAMPLES, timeout=60, env=env)
    assert "acked" in out
    await check_done(database_url, effect)


async def test_node_example(server, database_url, app_role):
    node = node_ready()  # builds the TypeScript SDK the example depends on
    npm = shutil.which("npm")
    assert npm is not None
    folder = EXAMPLES / "node"
    run([npm, "install", "--no-audit", "--no-fund", "--no-package-lock"], folder, timeout=300)
    env = {"WERK_URL": server.url, "DATABASE_URL": as_user(database_url, app_role), "PATH": ""}
    out = run([node, "outbox.mjs"], folder, timeout=60, env=env)
    assert "acked" in out
    await check_done(database_url, "receipts")


def go_build(folder: Path, tmp_path: Path, env: dict[str, str]) -> Path:
    """Build the program in ``folder`` in GOPATH mode over Debian's Go packages (no module
    proxy), with the SDK at its import path."""
    if not (DEBIAN_GOPATH / "src/github.com/jackc/pgx/v4").is_dir():
        skip_loudly(f"Go example SKIPPED: Debian's pgx is not installed; install: {PGX_INSTALL}")
    gopath = tmp_path / "gopath"
    sdk = gopath / "src/github.com/werk-dev/werk/client"
    sdk.mkdir(parents=True, exist_ok=True)
    if not (sdk / "go").exists():
        (sdk / "go").symlink_to(ROOT / "client" / "go")
    env.update(GO111MODULE="off", GOPATH=f"{gopath}:{DEBIAN_GOPATH}", GOFLAGS="")
    binary = tmp_path / folder.name
    run(["go", "build", "-o", str(binary), "."], folder, timeout=300, env=env)
    return binary


def go_run(binary: Path, env: dict[str, str]) -> str:
    out = subprocess.run(
        [str(binary)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


async def test_go_example(server, database_url, app_role, tmp_path):
    env = go_env()
    binary = go_build(EXAMPLES / "go" / "outbox", tmp_path, env)
    env.update(WERK_URL=server.url, DATABASE_URL=as_user(database_url, app_role))
    assert "acked" in go_run(binary, env)
    await check_done(database_url, "receipts")


async def test_go_helper_rolls_back_when_the_lease_is_lost(
    server, database_url, app_role, tmp_path
):
    env = go_env()
    binary = go_build(Path(__file__).with_name("go_lost_lease"), tmp_path, env)
    env.update(WERK_URL=server.url, DATABASE_URL=as_user(database_url, app_role))
    assert go_run(binary, env).strip() == "lease lost"
    assert await sql(database_url, "SELECT * FROM effects") == []


LOST_LEASE_TS = """
import pg from "pg";
import { Client, LeaseLost, transactionalAck } from "@werk/client";
const werk = new Client({ url: process.env.WERK_URL });
const db = new pg.Client({ connectionString: process.env.DATABASE_URL });
await db.connect();
await db.query("CREATE TABLE effects (jid text)");
await db.query("SELECT werk.push('a', '[]', '{\\"queue\\": \\"lost\\"}')");
const [job] = await werk.fetch({ queues: ["lost"], wid: "w-lost", wait: 5 });
await werk.ack(job.jid, job.lease);  // someone else completed it meanwhile
try {
  await transactionalAck(db, job, (tx) => tx.query("INSERT INTO effects VALUES ($1)", [job.jid]));
  console.log("acked");
} catch (err) {
  console.log(err instanceof LeaseLost ? "lease lost" : String(err));
}
await db.end();
"""


async def test_node_helper_rolls_back_when_the_lease_is_lost(server, database_url, app_role):
    node = node_ready()
    npm = shutil.which("npm")
    assert npm is not None
    folder = EXAMPLES / "node"
    run([npm, "install", "--no-audit", "--no-fund", "--no-package-lock"], folder, timeout=300)
    env = {"WERK_URL": server.url, "DATABASE_URL": as_user(database_url, app_role), "PATH": ""}
    out = run([node, "--input-type=module", "-e", LOST_LEASE_TS], folder, timeout=60, env=env)
    assert out.strip() == "lease lost"
    assert await sql(database_url, "SELECT * FROM effects") == []
