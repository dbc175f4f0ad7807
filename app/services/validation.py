"""Input checks shared by the routes and services."""

from __future__ import annotations

import re
from typing import Any

import orjson

from app.errors import InvalidInput, PayloadTooLarge

# An escaped NUL ("\u0000") that is not itself an escaped backslash followed by "u0000".
_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


def check_payload(payload: Any, limit: int, *, field: str) -> None:
    """Refuse a payload over the size limit, or one Postgres jsonb (or our JSON codec) cannot store:
    otherwise it would fail later, inside the insert, as a 500."""
    try:
        encoded = orjson.dumps(payload)
    except orjson.JSONEncodeError as exc:  # an integer beyond 64 bits, a lone surrogate, deep nesting
        raise InvalidInput(f"{field} cannot be stored as JSON: {exc}", field=field) from None
    if len(encoded) > limit:
        raise PayloadTooLarge(f"{field} is {len(encoded)} bytes; the limit is {limit}", field=field)
    if _NUL.search(encoded):
        raise InvalidInput(f"{field} contains a NUL character (\\u0000); jsonb cannot store it", field=field)
