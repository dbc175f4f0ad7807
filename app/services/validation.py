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


# ── text from outside, on its way into Postgres ──

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # NUL, and surrogates (in a str, only lone ones)


def storable_text(value: str | bytes, limit: int) -> str:
    """What a target answered, an exception's message, a response excerpt: at most `limit`
    characters Postgres can store. Invalid UTF-8 becomes U+FFFD, and so do NUL (text columns refuse
    it) and lone surrogates (asyncpg cannot encode them): unsanitised, one such answer failed the
    group-committed outcome write of every run beside it, again and again. Cut before replacing, so a
    huge value costs no more than `limit` characters of work."""
    if isinstance(value, bytes):
        value = value[: limit * 4].decode("utf-8", errors="replace")
    return _UNSTORABLE.sub("\ufffd", value[:limit])
