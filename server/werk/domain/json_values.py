"""What PostgreSQL stores faithfully in text and jsonb columns: the one rule every way in (HTTP
bodies, FWP) applies to a client's text and JSON values.

jsonb refuses NUL (\\u0000) in text and keys, and text that is not Unicode (a lone surrogate
cannot be encoded as UTF-8); it keeps numbers as numeric, which a reader in another language
takes back as a 64-bit integer or a double, so a larger integer or NaN/Infinity would not come
back as sent. A whole number sent as a double (1e19) is kept as the integer it equals, so
doubles are bounded as integers are. A small number comes back written out in full (1e-300 as
0.000…1, 302 characters), so a body of them would be stored and fetched many times its size:
the zeros that adds are bounded per value. Deep nesting costs every reader recursion."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

MAX_JSON_DEPTH = 64
MAX_WRITTEN_ZEROS = 65_536  # per value, the zeros jsonb writes out for small numbers
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
    """``value`` (parsed JSON), or ValueError when jsonb cannot keep it exactly or would write
    it back much larger: text that check_text refuses (values and keys), NaN/Infinity, numbers
    beyond the range of 64-bit integers, small numbers whose written-out zeros exceed
    MAX_WRITTEN_ZEROS, nesting deeper than MAX_JSON_DEPTH."""
    # (most args and custom are empty: no call for them)
    if value and _check_container(value, 1) > MAX_WRITTEN_ZEROS:
        raise ValueError(
            "numbers below 1e-4 are written out in full (1e-300 as 0.000…1); their zeros "
            f"must total at most {MAX_WRITTEN_ZEROS} per value"
        )
    return value


def _check_scalar(item: Any) -> int:
    """The zeros jsonb writes out for ``item``, or ValueError."""
    if isinstance(item, str):
        check_text(item)
    elif isinstance(item, bool) or item is None:
        return 0
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
        if item and -1e-4 < item < 1e-4:  # written with an exponent, read back without one
            return -math.floor(math.log10(abs(item)))
    return 0


def _check_container(container: Any, depth: int) -> int:
    """The zeros jsonb writes out for ``container``'s numbers, or ValueError."""
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
        return _check_scalar(container)
    if depth >= MAX_JSON_DEPTH and container:  # its items would sit deeper
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    zeros = 0
    for item in items:
        kind = type(item)
        if kind is list or kind is dict:
            zeros += _check_container(item, depth + 1)
        elif kind is not bool and item is not None:
            zeros += _check_scalar(item)
    return zeros


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
