"""What a target answered, made storable: a run's `result` (a python handler's return value, a
webhook's body) and a webhook's `Retry-After`. Both come from outside and are hostile: a result is
bounded by SCHEDULER_MAX_RESULT_BYTES (over it, cut and flagged, never an error) and sanitised like
every other stored text; a Retry-After is bounded by SCHEDULER_MAX_RETRY_AFTER_SECONDS or ignored."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import orjson

from app.domain import NO_RESULT, StoredResult
from app.services.validation import storable_text

# An escaped NUL in JSON text (jsonb refuses it), with the escaped backslashes before it kept.
_ESCAPED_NUL = re.compile(rb"((?<!\\)(?:\\\\)*)\\u0000")


def result_of_value(value: Any, limit: int) -> StoredResult:
    """A python handler's return value. A value JSON cannot carry (an object, an integer beyond 64
    bits, a lone surrogate, nesting past orjson's 254) is stored as its text instead."""
    if value is None:
        return NO_RESULT
    try:
        encoded = orjson.dumps(value)
    except (orjson.JSONEncodeError, TypeError):
        return _text_result(_describe(value), limit)
    if len(encoded) > limit:
        return _text_result(encoded[:limit].decode("utf-8", errors="ignore"), limit, truncated=True)
    return StoredResult(_ESCAPED_NUL.sub(rb"\1\\ufffd", encoded).decode())


def result_of_body(body: bytes, content_type: str | None, limit: int) -> StoredResult:
    """A webhook's answer, of which at most limit + 1 bytes were read (one more than kept tells that
    there was more). JSON if it says application/json (or +json) and parses; otherwise its text."""
    if len(body) > limit:
        return _text_result(body[:limit].decode("utf-8", errors="ignore"), limit, truncated=True)
    if not body:
        return NO_RESULT
    if _is_json(content_type):
        try:
            return result_of_value(orjson.loads(body), limit)
        except orjson.JSONDecodeError:
            pass  # it claimed JSON and is not: kept as the text it is
    return _text_result(body.decode("utf-8", errors="replace"), limit)


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
