"""Clients generated from openapi/openapi.json, as a team without an SDK would make them:
openapi-python-client (Python) and openapi-typescript + openapi-fetch (TypeScript), each driving
push -> fetch -> ack -> fail and the typed errors against a real server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.clients.toolchains import ROOT, TS_DIR, node_ready, run
from tests.support.server import ServerProcess, clean_env

OPENAPI = ROOT / "openapi" / "openapi.json"
HERE = Path(__file__).parent / "generated"


def test_generated_python_client(shared_werk: ServerProcess, tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    env = clean_env({"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"})
    result = subprocess.run(
        [str(bin_dir / "openapi-python-client"), "generate", "--path", str(OPENAPI),
         "--output-path", str(tmp_path / "werk_api"), "--meta", "none"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Warning" not in result.stdout + result.stderr, result.stdout + result.stderr
    out = run(
        [sys.executable, str(HERE / "drive_python.py"), str(tmp_path), shared_werk.url],
        HERE,
        timeout=60,
        env=env,
    )
    assert "generated python client: ok" in out


def test_generated_typescript_client(shared_werk: ServerProcess, tmp_path: Path) -> None:
    # openapi-typescript, openapi-fetch and tsc come from the TypeScript SDK's devDependencies.
    node = node_ready()
    modules = TS_DIR / "node_modules"
    run(
        [node, str(modules / "openapi-typescript/bin/cli.js"), str(OPENAPI),
         "-o", str(tmp_path / "schema.d.ts"), "--default-non-nullable=false"],
        tmp_path, timeout=120,
    )  # fmt: skip
    shutil.copy(HERE / "drive.ts", tmp_path / "drive.ts")
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
                "files": ["drive.ts", "schema.d.ts"],
            }
        )
    )  # fmt: skip
    run([node, str(modules / "typescript/bin/tsc"), "-p", "."], tmp_path, timeout=180)
    env = clean_env({"WERK_URL": shared_werk.url})
    out = run([node, "drive.js"], tmp_path, timeout=60, env=env)
    assert "generated typescript client: ok" in out
