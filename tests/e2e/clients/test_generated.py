"""Clients generated from openapi/openapi.json, as a team without an SDK would make them, each
driving the job operations and the typed errors against a real server: openapi-python-client and
OpenAPI Generator's `python` generator (Python), openapi-typescript + openapi-fetch and
@hey-api/openapi-ts (TypeScript). Every generator is pinned: the Python ones in requirements.lock,
the TypeScript ones in the TypeScript SDK's devDependencies."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.e2e.clients.toolchains import ROOT, TS_DIR, java_ready, node_ready, run
from tests.support.server import ServerProcess, clean_env

OPENAPI = ROOT / "openapi" / "openapi.json"
HERE = Path(__file__).parent / "generated"


BIN = Path(sys.executable).parent


def _python_env() -> dict[str, str]:
    return clean_env({"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"})


def _drive_python(drive: str, generated: Path, url: str) -> str:
    """Runs ``drive`` with the generated package's directory and the server's URL."""
    cmd = [sys.executable, str(HERE / drive), str(generated), url]
    return run(cmd, HERE, timeout=60, env=_python_env())


def test_generated_python_client(shared_werk: ServerProcess, tmp_path: Path) -> None:
    result = subprocess.run(
        [str(BIN / "openapi-python-client"), "generate", "--path", str(OPENAPI),
         "--output-path", str(tmp_path / "werk_api"), "--meta", "none"],
        env=_python_env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Warning" not in result.stdout + result.stderr, result.stdout + result.stderr
    out = _drive_python("drive_python.py", tmp_path, shared_werk.url)
    assert "generated python client: ok" in out


def test_openapi_generator_python_client(shared_werk: ServerProcess, tmp_path: Path) -> None:
    """OpenAPI Generator (the Java tool, run through the PyPI package that bundles its jar)."""
    java_ready()
    out = run(
        [str(BIN / "openapi-generator-cli"), "generate", "-g", "python", "-i", str(OPENAPI),
         "-o", str(tmp_path), "--package-name", "werk_oag",
         "--additional-properties=generateSourceCodeOnly=true"],
        tmp_path, timeout=300, env=_python_env(),
    )  # fmt: skip
    assert "ERROR" not in out, out
    out = _drive_python("drive_openapi_generator.py", tmp_path, shared_werk.url)
    assert "openapi-generator python client: ok" in out


def _compile_and_run(node: str, tmp_path: Path, drive: str, files: list[str], url: str) -> str:
    """tsc (strict) over ``drive`` and the generated ``files``, then node runs it."""
    modules = TS_DIR / "node_modules"
    shutil.copy(HERE / drive, tmp_path / drive)
    (tmp_path / "node_modules").symlink_to(modules, target_is_directory=True)
    (tmp_path / "package.json").write_text(json.dumps({"type": "module"}))
    (tmp_path / "tsconfig.json").write_text(
        json.dumps(
            {
                "compilerOptions": {
                    "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext",
                    "lib": ["ES2022", "DOM"], "types": ["node"], "strict": True,
                    "skipLibCheck": True,
                },
                "files": [drive, *files],
            }
        )
    )  # fmt: skip
    run([node, str(modules / "typescript/bin/tsc"), "-p", "."], tmp_path, timeout=180)
    env = clean_env({"WERK_URL": url})
    return run([node, drive.replace(".ts", ".js")], tmp_path, timeout=60, env=env)


def test_hey_api_typescript_client(shared_werk: ServerProcess, tmp_path: Path) -> None:
    node = node_ready()
    run(
        [node, str(TS_DIR / "node_modules/@hey-api/openapi-ts/bin/run.js"), "-i", str(OPENAPI),
         "-o", str(tmp_path / "client"), "-c", "@hey-api/client-fetch", "--no-log-file"],
        tmp_path, timeout=120,
    )  # fmt: skip
    files = [str(p.relative_to(tmp_path)) for p in sorted((tmp_path / "client").rglob("*.ts"))]
    out = _compile_and_run(node, tmp_path, "drive_hey_api.ts", files, shared_werk.url)
    assert "hey-api typescript client: ok" in out


def test_generated_typescript_client(shared_werk: ServerProcess, tmp_path: Path) -> None:
    # openapi-typescript, openapi-fetch and tsc come from the TypeScript SDK's devDependencies.
    node = node_ready()
    modules = TS_DIR / "node_modules"
    run(
        [node, str(modules / "openapi-typescript/bin/cli.js"), str(OPENAPI),
         "-o", str(tmp_path / "schema.d.ts"), "--default-non-nullable=false"],
        tmp_path, timeout=120,
    )  # fmt: skip
    out = _compile_and_run(node, tmp_path, "drive.ts", ["schema.d.ts"], shared_werk.url)
    assert "generated typescript client: ok" in out
