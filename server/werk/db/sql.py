"""Loads the SQL files once; each statement is referenced by its file name.

Statements are composed one way. A statement written once for inputs or answers of different
shapes holds a ``/*marker*/`` where the shapes differ (once or more), and
``sql(name, marker=part)`` fills it, everywhere it stands, with a part: a whole file
(``"queue_state_pairs"``, a CTE several statements share) or a part written below the statement
in a file (``"job_push.one"``: the lines after ``-- part one:`` up to the next part, their
comment lines left out). Every name is a file of this package, never input."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_PART = re.compile(r"^-- part (\w+):.*$", re.MULTILINE)
_MARKER = re.compile(r"/\*\w+\*/")


@cache
def _file(name: str) -> tuple[str, dict[str, str]]:
    """File ``name``: its statement (the text before its first part) and its parts."""
    text = resources.files("werk.db").joinpath("sql", f"{name}.sql").read_text()
    pieces = _PART.split(text)
    parts = {}
    for part, body in zip(pieces[1::2], pieces[2::2], strict=True):
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        parts[part] = "\n".join(lines).strip()
    return pieces[0], parts


def _part(ref: str) -> str:
    name, _, part = ref.partition(".")
    statement, parts = _file(name)
    if not part:
        return statement
    if part not in parts:
        raise ValueError(f"{name}.sql has no part {part}")
    return parts[part]


@cache
def sql(name: str, **parts: str) -> str:
    """Statement ``name`` with each ``/*marker*/`` filled, wherever it stands, with the part
    given for it (``marker=file`` or ``marker=file.part``)."""
    text = _part(name)
    for marker, ref in parts.items():
        tag = f"/*{marker}*/"
        if tag not in text:
            raise ValueError(f"{name}.sql holds no {tag}")
        text = text.replace(tag, _part(ref))
    if _MARKER.search(text):
        raise ValueError(f"{name}.sql has a marker no part fills")
    return text
