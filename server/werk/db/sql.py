"""Loads the SQL files once; each statement is referenced by its file name."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def sql(name: str) -> str:
    return resources.files("werk.db").joinpath("sql", f"{name}.sql").read_text()


@cache
def sql_with(name: str, marker: str, part: str) -> str:
    """Statement ``name`` with its ``/*marker*/`` replaced by the text of file ``part``: one
    statement written once for inputs of different shapes. Both are files of this package."""
    tag = f"/*{marker}*/"
    text = sql(name)
    if text.count(tag) != 1:
        raise ValueError(f"{name}.sql must hold {tag} exactly once")
    return text.replace(tag, sql(part))
