"""The README's "Using it with curl" walkthrough, executed: every ```sh block of that section
runs, in order, in one bash (errexit, pipefail) against a fresh server, so the README cannot rot."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.clients.toolchains import ROOT, skip_loudly
from tests.support.server import ServerProcess, clean_env


def curl_walkthrough() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## Using it with curl\n")
    end = readme.find("\n## ", start + 1)
    section = readme[start : end if end != -1 else len(readme)]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    assert len(blocks) >= 6, "the curl section lost its ```sh blocks"
    return "\n".join(blocks)


def split_output(out: str) -> tuple[list[dict[str, object]], str]:
    """curl prints bodies without newlines: the JSON documents in order, and the other text."""
    decoder = json.JSONDecoder()
    documents: list[dict[str, object]] = []
    text: list[str] = []
    i = 0
    while i < len(out):
        if out[i] == "{":
            document, i = decoder.raw_decode(out, i)
            documents.append(document)
        else:
            text.append(out[i])
            i += 1
    return documents, "".join(text)


@pytest.fixture(scope="module")
def bash() -> str:
    found = shutil.which("bash")
    if found is None or shutil.which("curl") is None:
        skip_loudly("curl walkthrough SKIPPED: bash or curl not found; apt-get install -y curl")
    assert found is not None
    return found


def test_the_readme_curl_walkthrough_runs(
    bash: str, shared_werk: ServerProcess, tmp_path: Path
) -> None:
    script = curl_walkthrough().replace("localhost:7420", f"127.0.0.1:{shared_werk.port}")
    assert "localhost" not in script
    result = subprocess.run(
        [bash, "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        # `python3` (used to pick the lease out of a fetch) is at least this interpreter.
        env=clean_env({"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 0, f"{out}\n{result.stderr}"
    documents, text = split_output(out)
    pushed = [d for d in documents if d.get("jid") == "welcome-0001"]
    assert pushed and pushed[0]["state"] == "available"
    assert any(d.get("created") == 3 for d in documents)  # the batch
    assert "204" in text.split()  # the ack
    assert any(set(d) == {"jid", "lease_expires_at"} for d in documents)  # the extend
    assert any(d.get("state") == "scheduled" and d.get("jid") == "import-0001" for d in documents)
    assert any(d.get("code") == "lease_lost" and d.get("status") == 409 for d in documents)
    assert {"state": "running"} in documents
    job = [d for d in documents if d.get("jid") == "import-0001" and "failure" in d][-1]
    assert job["failure"]["errtype"] == "IOError"
    assert job["progress"] == {"rows_done": 5000}
    assert any("totals" in d for d in documents)  # info
    assert {"status": "ready"} in documents
