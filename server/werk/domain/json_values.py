"""What PostgreSQL stores faithfully in text and jsonb columns: the one rule every way in (HTTP
bodies, FWP) applies to a client's text and JSON values.

jsonb refuses NUL (\\u0000) in text and keys, and text that is not Unicode (a lone surrogate
cannot be encoded as UTF-8); it keeps numbers as numeric, which a reader in another language
takes back as a 64-bit integer or a double, so a larger integer or NaN/Infinity would not come
back as sent. A whole number sent as a double (1e19) is kept as the integer it equals, so
doubles are bounded as integers are; and deep nesting costs every reader recursion."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

MAX_JSON_DEPTH = 64
INT64 = 2**63  # integers lie in [-INT64, INT64)
# check_text's rule as a JSON Schema pattern (the lone surrogate a pattern cannot state).
NO_NUL = r"^[^\x00]*$"


def check_text(text: str) -> str:
    """``text``, or ValueError when PostgreSQL cannot store it (NUL, lone surrogates)."""
    if "\x00" in text:
        raise ValueError("must not contain NUL (\\u0000) characters")
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise ValueError("must not contain lone surrogates (\\ud800-\\udfff)") from None
    return text


def check_json(value: Any) -> Any:
    """``value`` (parsed JSON), or ValueError when jsonb cannot keep it exactly: text that
    check_text refuses (values and keys), NaN/Infinity, numbers beyond the range of 64-bit
    integers, nesting deeper than MAX_JSON_DEPTH."""
    if value:  # (most args and custom are empty: no call for them)
        _check_container(value, 1)
    return value


def _check_scalar(item: Any) -> None:
    if isinstance(item, str):
        check_text(item)
    elif isinstance(item, bool) or item is None:
        return
    elif isinstance(item, int):
        if not -INT64 <= item < INT64:
            raise ValueError(f"integers must fit in {INT64.bit_length()} bits")
    elif isinstance(item, float):
        if not math.isfinite(item):
            raise ValueError("numbers must be finite (no NaN or Infinity)")
        if not -INT64 <= item < INT64:
            raise ValueError(
                f"numbers must lie within the range of {INT64.bit_length()}-bit integers"
            )


def _check_container(container: Any, depth: int) -> None:
    # Parsed JSON holds exact builtin types, so ``type(...) is`` picks the common cases at a
    # fraction of isinstance's cost; anything else takes _check_scalar's general path.
    items: Iterable[Any]
    kind = type(container)
    if kind is list:
        items = container
    elif kind is dict:
        for key in container:
            check_text(key)
        items = container.values()
    else:
        _check_scalar(container)
        return
    if depth >= MAX_JSON_DEPTH and container:  # its items would sit deeper
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    for item in items:
        kind = type(item)
        if kind is list or kind is dict:
            _check_container(item, depth + 1)
        elif kind is not bool and item is not None:
            _check_scalar(item)


def walk(value: Any, steps: Iterable[str]) -> Any:
    """The value reached from ``value`` by ``steps`` (object keys, array indexes as digits), or
    None where they lead nowhere."""
    for step in steps:
        if type(value) is dict:
            value = value.get(step)
        elif type(value) is list and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return None
    return value
