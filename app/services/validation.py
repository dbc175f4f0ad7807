"""Input checks shared by the routes and services: one rule for payloads, whichever door they use
(job PUT, run POST, batch), and one for moments, wherever one is accepted."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import orjson
from pydantic import AfterValidator, AwareDatetime
from pydantic_core import PydanticCustomError

from app.domain import MAX_EXPIRE_AFTER_SECONDS, MIN_EXPIRE_AFTER_SECONDS
from app.errors import InvalidInput, PayloadTooLarge

# An escaped NUL ("\u0000") that is not itself an escaped backslash followed by "u0000".
_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


# The integers orjson writes (and so the engine's messages and the API's answers carry): 64 bits,
# signed or unsigned.
_MIN_INT, _MAX_INT = -(2**63), 2**64 - 1


def shape_problem(value: Any, max_depth: int) -> str | None:
    """Why `value` is JSON no run keeps (None: it is within the bounds), as the end of a sentence
    naming it: nested deeper than `max_depth` containers, or a number JSON cannot carry.

    Depth: the engine nests a payload two levels deeper inside its message, the API a result three
    levels deeper in a listing, and orjson refuses anything past 254: a payload of 253 stored fine
    and then killed every engine that claimed it, a result of 253 failed every listing page holding
    it. Numbers: Python's JSON parser reads NaN, Infinity and 1e400 (an overflow to infinity), which
    orjson then writes as null, a silent change of the caller's data; an integer beyond 64 bits
    orjson cannot write at all."""
    # Level by level, so a scalar costs a type check and no bookkeeping: 8000 values take 1.8 ms,
    # 3.9 ms as a stack of (value, depth).
    level: list[Any] = [value]
    depth = 0  # the containers around `level`'s values
    while level:
        inner: list[Any] = []
        containers = 0
        for item in level:
            if isinstance(item, dict):
                inner.extend(item.values())
                containers += 1
            elif isinstance(item, list):
                inner.extend(item)
                containers += 1
            elif isinstance(item, float):
                if not math.isfinite(item):
                    return "holds a number JSON cannot represent (NaN, Infinity or out of range)"
            elif isinstance(item, int) and not _MIN_INT <= item <= _MAX_INT:
                return "holds an integer beyond 64 bits"
        if containers:
            depth += 1
            if depth > max_depth:
                return f"is nested deeper than {max_depth} levels"
        level = inner
    return None


def _check_shape(payload: Any, max_depth: int, field: str) -> None:
    problem = shape_problem(payload, max_depth)
    if problem is not None:
        raise InvalidInput(f"{field} {problem}", field=field)


def check_payload(payload: Any, limit: int, *, max_depth: int, field: str) -> None:
    """Refuse a payload over the size or depth limit, or one Postgres jsonb, our JSON codec or the
    engine's message cannot store unchanged: otherwise it fails later, as a 500 or a dead engine."""
    try:
        encoded = orjson.dumps(payload)
    except orjson.JSONEncodeError as exc:  # too deep, an integer beyond 64 bits, a lone surrogate
        _check_shape(payload, max_depth, field)  # names the depth or the number when that is the reason
        raise InvalidInput(f"{field} cannot be stored as JSON: {exc}", field=field) from None
    if len(encoded) > limit:
        raise PayloadTooLarge(f"{field} is {len(encoded)} bytes; the limit is {limit}", field=field)
    # After the size check, so the walk is bounded by the size limit.
    _check_shape(payload, max_depth, field)
    if _NUL.search(encoded):
        raise InvalidInput(f"{field} contains a NUL character (\\u0000); jsonb cannot store it", field=field)


# A run's metadata: what a caller keeps with the run to find its way back (an order, a user), not
# data for the target (that is the payload), so it is small.
MAX_METADATA_BYTES = 4096
METADATA_RULE = (
    f"A JSON object, at most {MAX_METADATA_BYTES} bytes encoded, nested no deeper than a payload, "
    "without NUL characters."
)


def check_metadata(metadata: dict[str, Any], *, max_depth: int, field: str) -> None:
    """A payload's rules with its own size bound; over it is invalid input (422), as any field
    beyond its bound, not a body too large to take (413)."""
    try:
        check_payload(metadata, MAX_METADATA_BYTES, max_depth=max_depth, field=field)
    except PayloadTooLarge as exc:
        raise InvalidInput(exc.message, field=field) from None


# ── moments ──


def utc_moment(value: datetime) -> datetime:
    """An aware moment in UTC; a ValueError naming the bound for one that has no UTC form: past
    year 9999 or before year 1 once its offset applies (9999-12-31T23:59:59-14:00). Every moment
    the API and the dashboard accept passes here: left to the database driver, such a moment was an
    OverflowError, a 500, in a filter, a listing or a reschedule."""
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise PydanticCustomError(
            "moment_out_of_range", "a moment between the years 1 and 9999 in UTC is required"
        ) from None


# What every body and query parameter that takes a moment declares (422 naming the field).
Moment = Annotated[AwareDatetime, AfterValidator(utc_moment)]


def deadline_after(expires_at: datetime, scheduled_at: datetime | None) -> datetime:
    """A run's deadline to start, if it lies 1 s to 31 days after the run's scheduled_at (now when
    it names none, by this clock: the database's then decides when the run expires); otherwise an
    error saying so, the 422 of the field that declares it."""
    window = (expires_at - (scheduled_at or datetime.now(UTC))).total_seconds()
    if not MIN_EXPIRE_AFTER_SECONDS <= window <= MAX_EXPIRE_AFTER_SECONDS:
        raise PydanticCustomError(
            "deadline_out_of_range",
            "must be {low} s to {high} days after scheduled_at (now when absent); it is {window} s after",
            {
                "low": MIN_EXPIRE_AFTER_SECONDS,
                "high": MAX_EXPIRE_AFTER_SECONDS // 86_400,
                "window": round(window, 3),
            },
        )
    return expires_at


def check_schedule_window(moment: datetime, *, ahead_days: int, behind_days: int, field: str) -> None:
    """A run's time at most SCHEDULER_MAX_SCHEDULE_AHEAD_DAYS ahead and ..._BEHIND_DAYS behind
    (InvalidInput naming `field`). A sanity bound read on this node's clock, not a due decision:
    the database's clock still decides when a run is due."""
    now, name = datetime.now(UTC), field.rsplit(".", 1)[-1]
    if moment > now + timedelta(days=ahead_days):
        raise InvalidInput(f"{name} is more than {ahead_days} days ahead", field=field)
    if moment < now - timedelta(days=behind_days):
        raise InvalidInput(f"{name} is more than {behind_days} days in the past", field=field)


# ── text from outside, on its way into Postgres ──

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # NUL, and surrogates (in a str, only lone ones)
MAX_ERROR_CHARS = 2000  # of a run's last_error, whoever writes it (the engine or a worker)


def storable_text(value: str | bytes, limit: int) -> str:
    """What a target answered, an exception's message, a response excerpt: at most `limit`
    characters Postgres can store. Invalid UTF-8 becomes U+FFFD, and so do NUL (text columns refuse
    it) and lone surrogates (asyncpg cannot encode them): unsanitised, one such answer failed the
    group-committed outcome write of every run beside it, again and again. Cut before replacing, so a
    huge value costs no more than `limit` characters of work."""
    if isinstance(value, bytes):
        value = value[: limit * 4].decode("utf-8", errors="replace")
    return _UNSTORABLE.sub("\ufffd", value[:limit])
