"""Loads the SQL files once; each statement is referenced by its file name."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def sql(name: str) -> str:
    return resources.files("werk.db").joinpath("sql", f"{name}.sql").read_text()
