"""The packages as a release ships them: `werk` and `werk-client` built as sdists and wheels
(`python -m build`), installed in a fresh virtualenv, and run from there (not from this checkout)
in a directory outside it: `werk serve` migrates an empty database and serves the dashboard's
assets, `werk-worker` processes a job. The TypeScript package packs (`npm pack`) and installs in
an empty directory, and the compiled lib/ it ships is what src/ compiles to."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import werk
from tests.e2e.clients.toolchains import ROOT, TS_DIR, node_found, node_ready, run
from tests.support import database
from tests.support.server import clean_env, free_port

VERSION = werk.__version__


@pytest.fixture
def empty_database(test_databases: database.TestDatabases) -> Iterator[str]:
    name = asyncio.run(test_databases.create_empty())
    try:
        yield test_databases.url(name)
    finally:
        asyncio.run(test_databases.drop(name))


def build(project: Path, out: Path) -> None:
    run([sys.executable, "-m", "build", "--outdir", str(out), str(project)], ROOT, timeout=300)


def package_data(names: list[str]) -> set[str]:
    """The files the server reads at run time besides its modules."""
    return {n for n in names if n.endswith((".sql", ".html", ".css", ".js", "py.typed"))}


def test_python_packages_build_install_and_run(tmp_path: Path, empty_database: str) -> None:
    dist = tmp_path / "dist"
    build(ROOT, dist)
    build(ROOT / "client/python", dist)
    built = sorted(p.name for p in dist.iterdir())
    assert built == [
        f"werk-{VERSION}-py3-none-any.whl",
        f"werk-{VERSION}.tar.gz",
        f"werk_client-{VERSION}-py3-none-any.whl",
        f"werk_client-{VERSION}.tar.gz",
    ]

    # Every SQL statement, migration, template and static asset is in both server artifacts.
    source = ROOT / "server"
    expected = package_data([str(p.relative_to(source)) for p in source.rglob("werk/**/*.*")])
    assert any(n.startswith("werk/db/migrations/") for n in expected)
    assert any(n.startswith("werk/web/static/") for n in expected)
    wheel = zipfile.ZipFile(dist / f"werk-{VERSION}-py3-none-any.whl").namelist()
    assert package_data(wheel) == expected
    with tarfile.open(dist / f"werk-{VERSION}.tar.gz") as sdist:
        prefix = f"werk-{VERSION}/server/"
        in_sdist = [n.removeprefix(prefix) for n in sdist.getnames() if n.startswith(prefix)]
    assert package_data(in_sdist) == expected

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    bin_ = venv / "bin"
    wheels = [str(dist / n) for n in built if n.endswith(".whl")]
    run([str(bin_ / "python"), "-m", "pip", "install", "-q", *wheels], tmp_path, timeout=600)

    home = tmp_path / "home"  # outside the checkout: nothing can be imported from it
    home.mkdir()
    env = clean_env({"PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}"})
    env.pop("PYTHONPATH", None)
    imported = "import werk, werk_client; print(werk.__file__, werk_client.__file__)"
    where = run([str(bin_ / "python"), "-c", imported], home, timeout=60, env=env).split()
    assert all(path.startswith(str(venv)) for path in where), where
    assert run([str(bin_ / "werk"), "--version"], home, timeout=60, env=env).strip() == (
        f"werk {VERSION}"
    )

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server_env = {
        **env,
        "WERK_DATABASE_URL": empty_database,
        "WERK_PORT": str(port),
        "WERK_HOST": "127.0.0.1",
        "WERK_FAKTORY_PORT": "0",
        "WERK_LOG_LEVEL": "warning",
    }
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(
        [str(bin_ / "werk"), "serve"], cwd=home, env=server_env, stdout=log, stderr=log
    )
    worker: subprocess.Popen[bytes] | None = None
    try:
        wait_ready(url, server, tmp_path / "serve.log")
        with httpx.Client(base_url=url, timeout=10) as http:
            assert http.get("/v1/info").json()["server"]["version"] == VERSION
            css = http.get("/static/werk.css")
            assert css.status_code == 200 and css.text
            assert http.get("/").status_code in {200, 303, 307}

            (home / "pkgjobs.py").write_text(
                "from werk_client import Registry\n"
                "registry = Registry()\n"
                "@registry.handler('greet')\n"
                "def greet(name):\n"
                "    print('hello', name, flush=True)\n"
            )
            push = "from werk_client import Client; print(Client().push('greet', ['ada']).jid)"
            worker_env = {**env, "WERK_URL": url}
            jid = run([str(bin_ / "python"), "-c", push], home, 60, worker_env).strip()
            assert http.get(f"/v1/jobs/{jid}").json()["state"] == "available"
            worker_log = tmp_path / "worker.log"
            with worker_log.open("wb") as out:
                worker = subprocess.Popen(
                    [str(bin_ / "werk-worker"), "--queues", "default", "pkgjobs"],
                    cwd=home,
                    env=worker_env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            deadline = time.monotonic() + 60
            while http.get(f"/v1/jobs/{jid}").status_code != 404:  # acked: deleted
                assert worker.poll() is None, worker_log.read_text()
                assert time.monotonic() < deadline, worker_log.read_text()
                time.sleep(0.2)
            assert http.get("/v1/info").json()["totals"]["processed"] == 1
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(30) == 0, worker_log.read_text()
            assert "hello ada" in worker_log.read_text()
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0, (tmp_path / "serve.log").read_text()
    finally:
        for process in (worker, server):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(10)
        log.close()


def wait_ready(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert server.poll() is None, f"werk serve exited:\n{log.read_text()}"
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"werk serve not ready:\n{log.read_text()}")


def test_typescript_package_packs_and_installs(tmp_path: Path) -> None:
    node, npm = node_found()  # packing needs none of the SDK's devDependencies
    packed = json.loads(
        run([npm, "pack", "--json", "--pack-destination", str(tmp_path)], TS_DIR, timeout=120)
    )
    files = sorted(f["path"] for f in packed[0]["files"])
    assert "lib/index.js" in files and "lib/index.d.ts" in files
    assert all(f.startswith("lib/") or f in {"package.json", "README.md"} for f in files), files
    tarball = tmp_path / packed[0]["filename"]
    assert packed[0]["version"] == VERSION

    app = tmp_path / "app"
    app.mkdir()
    env = clean_env({"npm_config_audit": "false", "npm_config_fund": "false"})
    run([npm, "install", str(tarball)], app, timeout=300, env=env)
    assert not (app / "node_modules/@werk/client").is_symlink()  # a copy, not the checkout
    script = (
        'import { VERSION, Client, Worker } from "@werk/client";\n'
        "console.log(VERSION, typeof Client, typeof Worker);\n"
    )
    (app / "check.mjs").write_text(script)
    out = run([node, "check.mjs"], app, timeout=60, env=env)
    assert out.split() == [VERSION, "function", "function"]


def test_typescript_lib_is_src_compiled(tmp_path: Path) -> None:
    """lib/ is committed (installing the package needs no compiler); it must be what
    `npm run build` makes of src/ now."""
    node = node_ready()
    fresh = tmp_path / "lib"
    tsc = "node_modules/typescript/bin/tsc"
    run([node, tsc, "-p", "tsconfig.build.json", "--outDir", str(fresh)], TS_DIR, timeout=180)
    lib = TS_DIR / "lib"
    built = {p.relative_to(fresh): p.read_bytes() for p in fresh.rglob("*") if p.is_file()}
    committed = {p.relative_to(lib): p.read_bytes() for p in lib.rglob("*") if p.is_file()}
    assert built.keys() == committed.keys(), "run `npm run build` in client/typescript"
    stale = sorted(str(name) for name in built if built[name] != committed[name])
    assert stale == [], (
        f"{stale} are stale: run `npm run build` in client/typescript and commit lib/"
    )
