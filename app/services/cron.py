"""Cron schedules: validation, next fire across DST, and what to materialize after a misfire.

Pure functions, no I/O. Every instant returned is an aware UTC datetime.

Accepted schedules: the standard 5 fields `minute hour day-of-month month day-of-week` with `*`,
numbers, ranges, lists, steps and three-letter month/day names (Sunday is 0 or 7; when both day
fields are restricted a day matching either fires, as in Vixie cron), plus the macros @yearly,
@annually, @monthly, @weekly, @daily, @midnight and @hourly, which are exact 5-field aliases.
Rejected: seconds or year fields, @reboot, and croniter's extensions (`L`, `W`, `#`, `?`, `H`,
`R`) — other cron implementations lack them and we do not promise them. A day/month pair that can
never occur (`0 0 30 2 *`) is rejected too: a job that never fires is a typo, not a schedule.

Time semantics. A schedule is read against the wall clock of the job's IANA time zone, and is one
of two kinds:

- An *appointment* restricts the hour field (`30 2 * * *`, `0 */6 * * *`, `*/10 2 * * *`). Each
  matching local date-time fires exactly once. A local time skipped by a spring-forward gap fires
  at the instant the gap ends (02:30 on 2026-03-29 in Europe/Berlin fires at 03:00 CEST), once even
  if several skipped times or a real occurrence land on that instant. A local time repeated by a
  fall-back overlap fires at its first occurrence (fold=0) only.
- An *interval* lets the hour field cover every hour (`*`, `*/1`, `0-23`, @hourly,
  `*/15 * * * *`). It follows the real clock, like Vixie cron's wildcard jobs: it fires whenever
  the local clock shows a matching time, so the repeated hour fires in both passes and the skipped
  hour fires nothing (no time elapses in it). `*/15 * * * *` fires every 15 real minutes and
  `0 * * * *` once per real hour straight through both transitions.

croniter computes only naive wall-clock matches here; we map them to UTC with zoneinfo (PEP 495
`fold`) ourselves, because croniter's own time zone handling fires `30 2 * * *` twice on a
fall-back day (7.0.0) and has a history of DST bugs.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from heapq import heappop, heappush
from itertools import islice, takewhile
from typing import Literal
from zoneinfo import ZoneInfo, available_timezones

from croniter import croniter

from app.errors import InvalidInput

Misfire = Literal["latest", "all", "skip"]
MISFIRE_POLICIES: tuple[Misfire, ...] = ("latest", "all", "skip")
# What a job does with an occurrence while its schedule's earlier runs are still live (docs/runs.md).
Overlap = Literal["allow", "skip", "buffer_one"]
MAX_JITTER_SECONDS = 3600
# How late an occurrence may be found and still count as on time under `skip`: the engine's
# materializer ticks far more often than this, so only a real outage exceeds it.
ON_TIME_TOLERANCE = timedelta(seconds=60)

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")


def _field_pattern(names: str = "") -> re.Pattern[str]:
    # An allowlist of the standard syntax only; croniter still does the parsing and range checks.
    value = rf"(?:\d+|{names})" if names else r"\d+"
    item = rf"(?:\*|{value}(?:-{value})?)(?:/\d+)?"
    return re.compile(rf"{item}(?:,{item})*", re.ASCII | re.IGNORECASE)


_FIELD_PATTERNS = (
    _field_pattern(),
    _field_pattern(),
    _field_pattern(),
    _field_pattern("jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"),
    _field_pattern("sun|mon|tue|wed|thu|fri|sat"),
)
# Host-dependent (`localtime` is whatever the machine is set to) or placeholders, not zones.
_NOT_ZONES = frozenset({"localtime", "Factory", "posixrules"})
_TICK = timedelta(microseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class _Schedule:
    expr: str  # the normalised 5-field form handed to croniter
    interval: bool  # the hour field covers every hour: follow the real clock across DST


@lru_cache(maxsize=4096)
def _parse(schedule: str) -> _Schedule:
    fields = _MACROS.get(schedule.strip().lower(), schedule).split()
    if len(fields) != 5:
        expected = f"5 fields (minute hour day-of-month month day-of-week) or one of {', '.join(_MACROS)}"
        raise InvalidInput(f"schedule must be {expected}", field="schedule")
    for name, text, pattern in zip(_FIELD_NAMES, fields, _FIELD_PATTERNS, strict=True):
        if not pattern.fullmatch(text):
            raise InvalidInput(f"schedule has an unsupported {name} field {text!r}", field="schedule")
    expr = " ".join(fields)
    try:
        expanded, _ = croniter.expand(expr, strict=True)
    except ValueError as exc:  # CroniterError is a ValueError; keep its last line, not a traceback
        reason = str(exc).strip().splitlines()[-1]
        raise InvalidInput(f"schedule {expr!r} is not valid: {reason}", field="schedule") from None
    return _Schedule(expr, interval=expanded[1] == ["*"])


def validate_schedule(schedule: str) -> None:
    """Raise InvalidInput(field="schedule") unless `schedule` is a supported cron expression."""
    _parse(schedule)


@cache
def _zone_names() -> frozenset[str]:
    # Scanning the tz database takes tens of milliseconds; it does not change while we run.
    return frozenset(available_timezones()) - _NOT_ZONES


def validate_timezone(name: str) -> ZoneInfo:
    """The zone for an IANA name such as "Europe/Berlin"; InvalidInput(field="timezone") otherwise."""
    if name not in _zone_names():
        raise InvalidInput(
            f"timezone {name!r} is not an IANA time zone name such as 'Europe/Berlin' or 'UTC'",
            field="timezone",
        )
    return ZoneInfo(name)


def _utc(moment: datetime, name: str) -> datetime:
    if moment.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware, got {moment!r}")
    return moment.astimezone(UTC)


def _offset(instant: datetime, zone: ZoneInfo) -> timedelta:
    return instant.astimezone(zone).utcoffset() or timedelta(0)


def _gap_end(before: datetime, after: datetime, zone: ZoneInfo) -> datetime:
    """The transition instant in (before, after], where the offset in force at `before` ends."""
    offset = _offset(before, zone)
    low, high = int(before.timestamp()), int(after.timestamp())
    while high - low > 1:  # tz database transitions fall on whole seconds
        mid = (low + high) // 2
        if _offset(datetime.fromtimestamp(mid, UTC), zone) == offset:
            low = mid
        else:
            high = mid
    return datetime.fromtimestamp(high, UTC)


def _instants(wall: datetime, zone: ZoneInfo, interval: bool) -> tuple[list[datetime], datetime]:
    """The instants one matching wall time fires at, and a floor no later wall fires below.

    The floor is the first instant at which the clock reads `wall` or later; it only grows with
    `wall`, which is what lets `_fires` release instants in order.
    """
    # PEP 495: fold=0 takes the offset in force before a transition, fold=1 the one after.
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    if first == second:
        return [first], first
    if first < second:  # an overlap: the clock reads `wall` twice
        return ([first, second] if interval else [first]), first
    end = _gap_end(second, first, zone)  # a gap: the clock never reads `wall`
    return ([] if interval else [end]), end


def _first_wall(after: datetime, zone: ZoneInfo) -> datetime:
    # If clocks go back soon after `after`, wall times before its own local reading still come
    # later in real time. Reading `after` at the smallest offset in force over the next 26 h covers
    # them: overlaps are shorter, and offsets span 26 h, so fires beyond that lie past this wall.
    smallest = min(_offset(after + timedelta(hours=h), zone) for h in range(27))
    return (after + smallest).replace(tzinfo=None)


def _fires(spec: _Schedule, zone: ZoneInfo, after: datetime) -> Iterator[datetime]:
    """Every fire instant strictly after `after` (UTC), increasing, each once."""
    walls = croniter(spec.expr, _first_wall(after, zone), ret_type=datetime)
    held: list[datetime] = []
    last = after
    while True:
        wall: datetime = walls.get_next(datetime)
        instants, floor = _instants(wall, zone, spec.interval)
        for instant in instants:
            heappush(held, instant)
        # Walls arrive in local order, but the second pass through a repeated hour comes after the
        # first pass through the walls that follow it; hold instants until no later wall can
        # produce an earlier one.
        while held and held[0] <= floor:
            instant = heappop(held)
            if instant > last:  # also merges skipped times that all landed on one gap end
                last = instant
                yield instant


def next_fire(schedule: str, tz: str, after: datetime) -> datetime:
    """The first occurrence strictly after `after` (aware, any zone), in UTC."""
    return next(_fires(_parse(schedule), validate_timezone(tz), _utc(after, "after")))


def occurrences_between(
    schedule: str, tz: str, after: datetime, until: datetime, limit: int
) -> list[datetime]:
    """Occurrences in (after, until], in UTC, oldest first, at most `limit`."""
    end = _utc(until, "until")
    fires = _fires(_parse(schedule), validate_timezone(tz), _utc(after, "after"))
    return list(islice(takewhile(lambda t: t <= end, fires), limit))


def _newest(spec: _Schedule, zone: ZoneInfo, start: datetime, now: datetime, limit: int) -> list[datetime]:
    """The newest `limit` occurrences in [start, now]: under a cap the oldest are dropped."""
    fires = takewhile(lambda t: t <= now, _fires(spec, zone, start - _TICK))
    return list(deque(fires, maxlen=limit))


def _latest(spec: _Schedule, zone: ZoneInfo, start: datetime, now: datetime) -> list[datetime]:
    """The last occurrence in [start, now], if any, without walking a long outage minute by minute."""
    width = timedelta(minutes=1)
    while True:  # windows growing back from now: a month-long outage scans minutes, not 40k runs
        begin = max(start, now - width)
        found = _newest(spec, zone, begin, now, 1)
        if found or begin == start:
            return found
        width *= 8


def due_occurrences(
    schedule: str,
    tz: str,
    next_fire_at: datetime,
    now: datetime,
    misfire: Misfire,
    catchup: timedelta,
    limit: int,
    *,
    on_time_tolerance: timedelta = ON_TIME_TOLERANCE,
) -> tuple[list[datetime], datetime]:
    """What to materialize now for a job whose stored next fire is `next_fire_at`.

    Occurrences in [next_fire_at, now] are due (`now` is the database clock). `latest` fires only
    the most recent due one, once for the whole outage. `all` fires every due one no older than
    `catchup`, at most `limit` (the newest). `skip` fires only occurrences at most
    `on_time_tolerance` old — found on time, not missed — and drops the rest. Returns the
    occurrences (UTC, oldest first) and the new next_fire_at, the first occurrence after `now`.
    """
    spec, zone = _parse(schedule), validate_timezone(tz)
    next_fire_at, now = _utc(next_fire_at, "next_fire_at"), _utc(now, "now")
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if next_fire_at > now:
        return [], next_fire_at
    if misfire == "latest":
        due = _latest(spec, zone, next_fire_at, now)
    elif misfire == "all":
        due = _newest(spec, zone, max(next_fire_at, now - catchup), now, limit)
    elif misfire == "skip":
        due = _newest(spec, zone, max(next_fire_at, now - on_time_tolerance), now, limit)
    else:
        raise ValueError(f"unknown misfire policy {misfire!r}; expected one of {MISFIRE_POLICIES}")
    return due, next(_fires(spec, zone, now))


def jittered(tenant_id: str, job: str, occurrence: datetime, jitter_seconds: int) -> datetime:
    """The time of an occurrence's run: `occurrence` moved later by an offset in [0, jitter_seconds)
    that is the occurrence's own, a hash of the job (tenant and name) and the occurrence. Every
    engine, every tick and every backfill gives one occurrence one time, which the unique
    (tenant_id, job, scheduled_at) index then makes once. In microseconds, so two occurrences of one
    job land on one time (and make one run) about once in jitter_seconds * 10^6 pairs."""
    if jitter_seconds <= 0:
        return occurrence
    at = _utc(occurrence, "occurrence")
    identity = f"{tenant_id}\0{job}\0{(at - _EPOCH) // _TICK}".encode()
    digest = hashlib.blake2b(identity, digest_size=8).digest()
    return at + _TICK * (int.from_bytes(digest, "big") % (jitter_seconds * 1_000_000))
