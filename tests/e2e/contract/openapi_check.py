"""Checks an answer against openapi/openapi.json: its status is declared for the operation, its
content type is the declared one, and its body matches the declared schema. Hooked into the
contract replays (an httpx response hook), so the document cannot drift from what the server
sends."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import jsonschema_rs

OPENAPI = Path(__file__).resolve().parents[3] / "openapi" / "openapi.json"


@cache
def _document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(OPENAPI.read_text())
    return document


@cache
def _templates() -> list[tuple[re.Pattern[str], str]]:
    """Path templates as patterns, literal ones first (/v1/jobs/batch before /v1/jobs/{jid})."""
    paths = sorted(_document()["paths"], key=lambda p: (p.count("{"), p))
    return [(re.compile("^" + re.sub(r"\{\w+\}", "[^/]+", p) + "$"), p) for p in paths]


@cache
def _validator(pointer: str) -> Any:
    """A validator for the schema at ``pointer`` (a JSON pointer into the document)."""
    schema: Any = _document()
    for part in pointer.strip("/").split("/"):
        schema = schema[part.replace("~1", "/").replace("~0", "~")]
    root = {**schema, "components": _document()["components"]}
    return jsonschema_rs.Draft202012Validator(root)


def _pointer(*parts: str) -> str:
    return "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


def mismatches(response: httpx.Response) -> list[str]:
    """What in the answer the document does not declare (empty: it tells the truth)."""
    method = response.request.method.lower()
    path = response.request.url.path
    template = next((t for pattern, t in _templates() if pattern.match(path)), None)
    where = f"{method.upper()} {path} -> {response.status_code}"
    if template is None or method not in _document()["paths"][template]:
        return [f"{where}: no such operation in the document"]
    responses = _document()["paths"][template][method]["responses"]
    status = str(response.status_code)
    if status not in responses:
        return [f"{where}: status not declared (declared: {sorted(responses)})"]
    content = responses[status].get("content")
    if not content:
        return [] if not response.content else [f"{where}: a body where none is declared"]
    media = response.headers.get("content-type", "").split(";", 1)[0].strip()
    if media not in content:
        return [f"{where}: content type {media!r} not declared (declared: {sorted(content)})"]
    if "schema" not in content[media] or not media.endswith("json"):
        return []
    validator = _validator(_pointer("paths", template, method, "responses", status, "content",
                                    media, "schema"))  # fmt: skip
    body = json.loads(response.content)
    return [f"{where}: {e.message} at {list(e.instance_path)}" for e in validator.iter_errors(body)]


class DocumentedAnswers:
    """An httpx response hook that records every answer the document does not describe."""

    def __init__(self) -> None:
        self.seen = 0
        self.problems: list[str] = []

    def __call__(self, response: httpx.Response) -> None:
        response.read()
        self.seen += 1
        self.problems.extend(mismatches(response))
