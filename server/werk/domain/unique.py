"""Unique keys: which pushes count as the same job.

A key the producer names is used as it is. Otherwise the key is a hash of the jobtype, the
queue and the job's arguments (or only the values at the listed paths), written as canonical
JSON: object keys sorted, numbers in one form. So ``600`` and ``600.0``, or an object whose keys
arrive in another order, give the same key, whichever client encoded them."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson

from werk.domain.job import OnConflict, UniqueLock, UniqueUntil
from werk.domain.json_values import walk

if TYPE_CHECKING:
    from werk.domain.bodies import JobPush, UniqueBody

# Hashed keys carry this prefix, so they are told apart from keys producers name.
HASHED_PREFIX = "sha256:"


def canonical(value: Any) -> Any:
    """``value`` (parsed JSON) in canonical form: integral numbers as integers (-0.0 as 0),
    object keys sorted when encoded (orjson's OPT_SORT_KEYS)."""
    kind = type(value)
    if kind is float:
        if math.isfinite(value) and value.is_integer():
            return int(value)
        return value
    if kind is list:
        return [canonical(v) for v in value]
    if kind is dict:
        return {k: canonical(v) for k, v in value.items()}
    return value


def canonical_json(value: Any) -> bytes:
    return orjson.dumps(canonical(value), option=orjson.OPT_SORT_KEYS)


def value_at(spec: JobPush, path: str) -> Any:
    """The value at ``path`` ("args.0.user", "custom.tenant") of the job, or None where the path
    leads nowhere."""
    root, *steps = path.split(".")
    return walk(spec.args if root == "args" else spec.custom, steps)


def unique_key(spec: JobPush, key: str | None, by: Sequence[str] | None) -> str:
    if key is not None:
        return key
    if by:
        subject: Any = {path: value_at(spec, path) for path in by}
    else:
        subject = spec.args
    digest = hashlib.sha256(canonical_json([spec.jobtype, spec.queue, subject])).hexdigest()
    return HASHED_PREFIX + digest


def unique_lock(spec: JobPush, unique: UniqueBody) -> UniqueLock:
    """The lock a push asks for."""
    key = unique_key(spec, unique.key, unique.by)
    seconds = unique.for_
    until = UniqueUntil(unique.until)
    on_conflict = OnConflict(unique.on_conflict)
    shown: dict[str, Any] = {"key": key, "until": until.value, "on_conflict": on_conflict.value}
    if seconds is not None:
        shown["for"] = seconds
    if unique.by:
        shown["by"] = list(unique.by)
    return UniqueLock(
        key=key,
        seconds=seconds,
        until=until,
        on_conflict=on_conflict,
        spec=orjson.dumps(shown).decode(),
    )
