"""What a target answered, made storable: a run's `result` (a python handler's return value, a
webhook's body) and a webhook's `Retry-After`. Both come from outside and are hostile: a result is
bounded like a payload — at most SCHEDULER_MAX_RESULT_BYTES (over it, cut and flagged, never an
error), nested at most SCHEDULER_MAX_PAYLOAD_DEPTH deep, numbers within what JSON carries (beyond
those, kept as its text and flagged) — and sanitised like every other stored text; a Retry-After is
bounded by SCHEDULER_MAX_RETRY_AFTER_SECONDS or ignored.

The depth bound is what keeps a run readable: the API answers a result inside the run inside a
listing, a callback inside its envelope, and orjson refuses past 254 levels in all. A target that
answered JSON 253 deep was stored as it was, and then every listing page holding the run, the run
itself and its callback failed, for as long as the run was kept."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import orjson

from app.domain import NO_RESULT, StoredResult
from app.services.validation import shape_problem, storable_text

# An escaped NUL in JSON text (jsonb refuses it), with the escaped backslashes before it kept.
_ESCAPED_NUL = re.compile(rb"((?<!\\)(?:\\\\)*)\\u0000")
# Nineteen digits in a row: where orjson may have read an integer beyond 64 bits as a float.
_LONG_DIGITS = re.compile(rb"\d{19}")
_NOT_JSON, _BEYOND = object(), object()


def result_of_value(value: Any, limit: int, *, max_depth: int) -> StoredResult:
    """A python handler's return value. A value JSON cannot carry (an object, a lone surrogate) is
    stored as its text; one beyond a payload's bounds (nested deeper than `max_depth`, an integer
    beyond 64 bits, NaN or Infinity) as its text too, flagged."""
    if value is None:
        return NO_RESULT
    try:
        encoded = orjson.dumps(value)
    except (orjson.JSONEncodeError, TypeError):
        beyond = shape_problem(value, max_depth) is not None
        return _text_result(_describe(value), limit, truncated=beyond)
    return _encoded_result(value, encoded, limit, max_depth)


def result_of_body(body: bytes, content_type: str | None, limit: int, *, max_depth: int) -> StoredResult:
    """A webhook's answer, of which at most limit + 1 bytes were read (one more than kept tells that
    there was more). JSON if it says application/json (or +json), parses and is within a payload's
    bounds; beyond them, its text, flagged; otherwise its text."""
    if len(body) > limit:
        return _text_result(body[:limit].decode("utf-8", errors="ignore"), limit, truncated=True)
    if not body:
        return NO_RESULT
    text = body.decode("utf-8", errors="replace")
    if not _is_json(content_type):
        return _text_result(text, limit)
    value = _parsed(body, max_depth)
    if value is _NOT_JSON:  # it claimed JSON and is not: kept as the text it is
        return _text_result(text, limit)
    if value is _BEYOND:
        return _text_result(text, limit, truncated=True)
    if value is None:
        return NO_RESULT
    try:
        encoded = orjson.dumps(value)
    except orjson.JSONEncodeError:  # past orjson's depth, or a lone surrogate the exact reading let through
        return _text_result(text, limit, truncated=shape_problem(value, max_depth) is not None)
    return _encoded_result(value, encoded, limit, max_depth)


def _encoded_result(value: Any, encoded: bytes, limit: int, max_depth: int) -> StoredResult:
    if len(encoded) > limit:
        return _text_result(encoded[:limit].decode("utf-8", errors="ignore"), limit, truncated=True)
    if _beyond_bounds(value, encoded, max_depth):
        return _text_result(encoded.decode(), limit, truncated=True)
    return StoredResult(_ESCAPED_NUL.sub(rb"\1\\ufffd", encoded).decode())


def _beyond_bounds(value: Any, encoded: bytes, max_depth: int) -> bool:
    """Whether the value is beyond a payload's bounds. Its encoding tells when the walk can find
    nothing, as for most results: depth d takes d opening brackets, and orjson writes NaN and
    Infinity as null (and cannot write an integer beyond 64 bits at all)."""
    if encoded.count(b"[") + encoded.count(b"{") <= max_depth and b"null" not in encoded:
        return False
    return shape_problem(value, max_depth) is not None


def _parsed(body: bytes, max_depth: int) -> Any:
    """The body's JSON value; _NOT_JSON if it is not JSON, _BEYOND if it is JSON beyond a payload's
    bounds in its numbers or its depth. orjson reads it fast, but refuses numbers beyond a double
    and nesting past 1024, and reads an integer beyond 64 bits as a float (a silent change): where
    it refused, or may have changed a number, the standard library's exact reading decides, and the
    bounds judge what it read. The body is within the size bound, so this costs little."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    else:
        if not _LONG_DIGITS.search(body):
            return value
    try:
        value = json.loads(body, parse_int=_bounded_int, parse_constant=_refuse_constant)
    except RecursionError:  # nested past the interpreter's limit: beyond the depth bound either way
        return _BEYOND
    except ValueError:  # not JSON (invalid UTF-8, the NaN and Infinity literals included)
        return _NOT_JSON
    return _BEYOND if shape_problem(value, max_depth) is not None else value


def _bounded_int(digits: str) -> int | float:
    """An integer literal exactly; past 21 characters it is beyond 64 bits anyway: infinity, which
    the bounds refuse (converting thousands of digits costs, and past 4300 raises)."""
    return int(digits) if len(digits) <= 21 else math.inf


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _is_json(content_type: str | None) -> bool:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _text_result(text: str, limit: int, *, truncated: bool = False) -> StoredResult:
    """`text` as a JSON string whose encoding fits `limit` bytes (escapes can make it up to six
    times longer than the text: it is cut until it fits)."""
    text = storable_text(text, limit)
    encoded = orjson.dumps(text)
    while len(encoded) > limit:
        truncated = True
        text = text[: max(0, len(text) * limit // len(encoded) - 8)]
        encoded = orjson.dumps(text)
    return StoredResult(encoded.decode(), truncated)


def _describe(value: Any) -> str:
    try:
        return str(value)
    except Exception:
        return f"(a {type(value).__name__} that has no text)"


# ── Retry-After ──

RETRY_AFTER_STATUSES = frozenset({429, 503})


def retry_after_seconds(header: str | None, max_seconds: float, now: datetime | None = None) -> float | None:
    """The delay a 429 or 503 asked for (RFC 9110 §10.2.3: delta seconds or an HTTP date), at most
    `max_seconds`; None for a value that is absent, negative, in the past or not one of the two
    forms (the backoff applies then). A date is turned into a delay on this clock at receipt; the
    delay is then added to the database's now(), the one clock due times use."""
    if header is None:
        return None
    value = header.strip()[:64]
    if value.isascii() and value.isdigit():
        return float(min(float(value), max_seconds))
    try:
        at = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if at is None or at.tzinfo is None:
        return None  # an HTTP date is always GMT; one without a zone is not an HTTP date
    delay = (at - (now or datetime.now(UTC))).total_seconds()
    if not math.isfinite(delay) or delay < 0:
        return None
    return float(min(delay, max_seconds))
