"""The README's client quickstarts, run as a new user would: each code block of "## Clients" is
taken from README.md itself, written into an empty project directory next to a checkout
(`../werk`), installed as the README says (pip into a fresh virtualenv, npm, a Go module with a
`replace` line) and run against a real `werk serve`: the job it pushes must be processed."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.e2e.clients.toolchains import ROOT, go_env, node_found
from tests.support.server import ServerProcess, clean_env
from werk_client import Client

HANDLED = "sending to ada@example.com"


def quickstart(language: str) -> list[tuple[str, str]]:
    """The code blocks (language, text) of one "### <language>" part of "## Clients"."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("\n## Clients\n")
    section = readme[start : readme.index("\n## ", start + 1)]
    part = re.search(rf"\n### {language}\b.*?(?=\n### |\Z)", section, flags=re.S)
    assert part is not None, f"README.md has no '### {language}' under '## Clients'"
    return re.findall(r"```(\w*)\n(.*?)```", part.group(0), flags=re.S)


def header(text: str) -> tuple[str, str | None]:
    """A file block names its path on its first line (`# push.py` or `// main.go`), and may add
    the command that runs it (`// app.mjs: node app.mjs`)."""
    found = re.match(r"(?:#|//) ([\w./-]+)(?:: (.+))?\n", text)
    assert found is not None, f"a quickstart file block must start by naming its file:\n{text}"
    return found.group(1), found.group(2)


@dataclass
class Project:
    """An empty directory beside `werk`, a link to this checkout, and the user's environment."""

    folder: Path
    env: dict[str, str]
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def write(self, text: str) -> str | None:
        path, command = header(text)
        target = self.folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return command

    def sh(self, script: str, timeout: float = 300) -> str:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert result.returncode == 0, f"`{script}` failed:\n{result.stdout}\n{result.stderr}"
        return result.stdout

    def run_until_processed(self, command: str, server: ServerProcess, timeout: float = 120) -> str:
        """Start a command that runs until SIGTERM (a worker), wait until the job it or an earlier
        step pushed is processed, stop it with SIGTERM (its whole process group: `go run` and
        `a && b` start children) and return its output."""
        with Client(server.url) as client:
            before = client.info().totals
            log = self.folder / "run.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    ["bash", "-c", command],
                    cwd=self.folder,
                    env=self.env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self.started.append(process)
            deadline = time.monotonic() + timeout
            while True:
                info = client.info()
                waiting = sum(info.states.get(s, 0) for s in ("available", "active", "scheduled"))
                if info.totals.processed > before.processed and waiting == 0:
                    break
                assert process.poll() is None, f"`{command}` exited early:\n{log.read_text()}"
                assert time.monotonic() < deadline, f"no job processed:\n{log.read_text()}"
                time.sleep(0.2)
            assert info.totals.processed == before.processed + 1
            assert info.totals.failed == before.failed
        self.stop(process)
        return log.read_text()

    def stop(self, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
        """SIGTERM to the process group, then wait until every member has exited."""
        with contextlib.suppress(ProcessLookupError):  # gone already
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        raise AssertionError("the worker did not exit on SIGTERM")

    def kill_all(self) -> None:
        for process in self.started:
            with contextlib.suppress(ProcessLookupError):  # gone already
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@pytest.fixture
def project(tmp_path: Path, shared_werk: ServerProcess) -> Iterator[Project]:
    (tmp_path / "werk").symlink_to(ROOT, target_is_directory=True)
    folder = tmp_path / "myproject"
    folder.mkdir()
    made = Project(folder, clean_env({"WERK_URL": shared_werk.url, "HOME": os.environ["HOME"]}))
    try:
        yield made
    finally:
        made.kill_all()


def test_python_quickstart(project: Project, shared_werk: ServerProcess) -> None:
    blocks = quickstart("Python")
    assert [lang for lang, _ in blocks] == ["sh", "python", "python", "sh"], blocks
    (_, install), (_, push), (_, jobs), (_, worker) = blocks
    venv = project.folder.parent / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    project.env["PATH"] = f"{venv / 'bin'}{os.pathsep}{project.env['PATH']}"
    project.env["VIRTUAL_ENV"] = str(venv)
    project.sh(install)
    command = project.write(push)
    assert command == "python push.py"
    assert project.write(jobs) is None
    with Client(shared_werk.url) as client:
        before = client.info().states.get("available", 0)
        project.sh(command)
        assert client.info().states.get("available", 0) == before + 1
    out = project.run_until_processed(worker, shared_werk)
    assert HANDLED in out
    # The installed package ran, not this checkout's.
    where = project.sh("python -c 'import werk_client; print(werk_client.__file__)'")
    assert where.startswith(str(venv)), where


@pytest.fixture
def node_project(project: Project) -> Project:
    # Node >= 20 and npm, or a loud skip; nothing is installed or built in client/typescript.
    node, npm = node_found()
    path = os.pathsep.join(dict.fromkeys([str(Path(node).parent), str(Path(npm).parent)]))
    project.env["PATH"] = f"{path}{os.pathsep}{project.env['PATH']}"
    project.env["npm_config_prefer_offline"] = "true"
    project.env["npm_config_audit"] = "false"
    project.env["npm_config_fund"] = "false"
    return project


def test_javascript_quickstart(node_project: Project, shared_werk: ServerProcess) -> None:
    blocks = quickstart("TypeScript")
    assert [lang for lang, _ in blocks] == ["sh", "js", "sh", "ts"], blocks
    (_, install), (_, app), _, _ = blocks
    node_project.sh(install)
    command = node_project.write(app)
    assert command == "node app.mjs"
    out = node_project.run_until_processed(command, shared_werk)
    assert HANDLED in out


def test_typescript_quickstart(node_project: Project, shared_werk: ServerProcess) -> None:
    blocks = quickstart("TypeScript")
    (_, install), _, (_, compile_and_run), (_, app) = blocks
    node_project.sh(install)
    *setup, run = compile_and_run.strip().splitlines()
    node_project.sh("\n".join(setup))
    assert node_project.write(app) is None
    out = node_project.run_until_processed(run, shared_werk)
    assert (node_project.folder / "app.mjs").exists()  # compiled by tsc
    assert HANDLED in out


def test_go_quickstart(project: Project, shared_werk: ServerProcess) -> None:
    env = go_env()  # or a loud skip, naming the install command
    blocks = quickstart("Go")
    assert [lang for lang, _ in blocks] == ["", "go"], blocks
    (_, gomod), (_, main) = blocks
    assert project.write(gomod) is None
    command = project.write(main)
    assert command == "go run ."
    # The README's go.mod works as it is: no -mod=mod, and no module proxy to reach.
    env.pop("GOFLAGS")
    env["WERK_URL"] = project.env["WERK_URL"]
    project.env = env
    out = project.run_until_processed(command, shared_werk)
    assert HANDLED in out
