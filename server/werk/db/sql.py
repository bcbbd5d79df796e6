"""Loads the SQL files once; each statement is referenced by its file name."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def sql(name: str) -> str:
    return resources.files("werk.db").joinpath("sql", f"{name}.sql").read_text()


@cache
def sql_with(name: str, **parts: str) -> str:
    """Statement ``name`` with each ``/*marker*/`` replaced by the text of the file given for it
    (``marker=file``): one statement written once for inputs or answers of different shapes.
    Every name is a file of this package, never input."""
    text = sql(name)
    for marker, part in parts.items():
        tag = f"/*{marker}*/"
        if text.count(tag) != 1:
            raise ValueError(f"{name}.sql must hold {tag} exactly once")
        text = text.replace(tag, sql(part))
    return text
