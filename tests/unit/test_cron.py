"""Cron next-fire, DST semantics and misfire policies (app.services.cron)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from functools import cache
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from app.errors import InvalidInput
from app.services.cron import (
    ON_TIME_TOLERANCE,
    Misfire,
    due_occurrences,
    next_fire,
    occurrences_between,
    validate_schedule,
    validate_timezone,
)

MINUTE = timedelta(minutes=1)
BERLIN, NEW_YORK = "Europe/Berlin", "America/New_York"
# Zones with every kind of transition: 1 h shifts at various local hours, 30 min (Lord Howe),
# +12:45/+13:45 (Chatham), half-hour base offset (St John's), transitions at midnight (Santiago,
# Beirut, Havana). None pushes a local time across midnight, so "once per local day" holds.
DST_ZONES = [
    BERLIN,
    NEW_YORK,
    "Europe/London",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "America/St_Johns",
    "America/Santiago",
    "Asia/Beirut",
    "America/Havana",
]
ZONES = [*DST_ZONES, "Asia/Kolkata", "UTC"]


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def is_interval(expr: str) -> bool:
    return croniter.expand(expr)[0][1] == ["*"]


def matcher(expr: str) -> Callable[[datetime], bool]:
    """A wall-time matcher built from croniter's expanded fields, independent of its iteration."""
    expanded, _ = croniter.expand(expr)
    minute, hour, dom, month, dow = (None if f == ["*"] else set(f) for f in expanded)

    def match(wall: datetime) -> bool:
        if (minute and wall.minute not in minute) or (hour and wall.hour not in hour):
            return False
        if month and wall.month not in month:
            return False
        dom_ok = dom is None or wall.day in dom
        dow_ok = dow is None or wall.isoweekday() % 7 in dow
        return (dom_ok or dow_ok) if dom and dow else (dom_ok and dow_ok)

    return match


def offset_changes_at(instant: datetime, zone: ZoneInfo) -> bool:
    return (instant - timedelta(seconds=1)).astimezone(zone).utcoffset() != instant.astimezone(
        zone
    ).utcoffset()


def brute_force(expr: str, tz: str, after: datetime, until: datetime) -> list[datetime]:
    """The documented semantics, minute by minute along the real clock."""
    zone, match, interval = ZoneInfo(tz), matcher(expr), is_interval(expr)
    out: list[datetime] = []
    instant = after.replace(second=0, microsecond=0) + MINUTE
    previous = (instant - MINUTE).astimezone(zone).replace(tzinfo=None)
    while instant <= until:
        local = instant.astimezone(zone)
        wall = local.replace(tzinfo=None)
        repeated = local.fold == 1 and wall.replace(tzinfo=zone, fold=0).utcoffset() != local.utcoffset()
        fire = match(wall) and (interval or not repeated)
        if not interval and wall - previous > MINUTE:  # the clock jumped: skipped times fire now
            skipped = (previous + MINUTE * k for k in range(1, (wall - previous) // MINUTE))
            fire = fire or any(match(w) for w in skipped)
        if fire:
            out.append(instant)
        previous, instant = wall, instant + MINUTE
    return out


@cache
def transitions(tz: str, year: int) -> list[datetime]:
    """The instants the zone's UTC offset changes during `year` (tz database transitions fall on minutes)."""
    zone, found, hour = ZoneInfo(tz), [], utc(year, 1, 1)
    while hour.year == year:
        following = hour + timedelta(hours=1)
        if hour.astimezone(zone).utcoffset() != following.astimezone(zone).utcoffset():
            found.append(
                next(hour + MINUTE * m for m in range(1, 61) if offset_changes_at(hour + MINUTE * m, zone))
            )
        hour = following
    return found


def fmt(instants: list[datetime], tz: str) -> list[str]:
    return [t.astimezone(ZoneInfo(tz)).isoformat() for t in instants]


# --- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schedule",
    [
        "* * * * *",
        "*/15 * * * *",
        "30 2 * * *",
        "0 9-17 * * mon-fri",
        "0 0 1 jan,JUL *",
        "0 0 * * 7",
        "5,35 */2 1-15 * 1-5",
        "0 0 29 2 *",
        "  0   0 * * *  ",
        "@hourly",
        "@daily",
        "@midnight",
        "@weekly",
        "@monthly",
        "@yearly",
        "@annually",
        "@DAILY",
    ],
)
def test_valid_schedules(schedule: str) -> None:
    validate_schedule(schedule)


@pytest.mark.parametrize(
    "schedule",
    [
        "",
        "   ",
        "* * * *",
        "0 0 * * * *",  # seconds
        "0 0 12 * * ? 2030",  # quartz with year
        "@reboot",
        "@every 5m",
        "60 * * * *",
        "0 24 * * *",
        "0 0 0 * *",
        "0 0 * 13 *",
        "0 0 * * 8",
        "*/0 * * * *",
        "0 0 L * *",
        "0 0 15W * *",
        "0 0 * * 1#2",
        "0 0 * * 5L",
        "0 0 ? * *",
        "H * * * *",
        "R * * * *",
        "0 0 30 2 *",  # never fires
        "0 0 31 4,6,9,11 *",
        "a b c d e",
        "0 0 * foo *",
        "0 0 * * monday",
        "1.5 * * * *",
        "\uff10 0 * * *",  # fullwidth digit
    ],
)
def test_invalid_schedules(schedule: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_schedule(schedule)
    assert caught.value.field == "schedule"
    assert caught.value.status_code == 422


@pytest.mark.parametrize("name", ["UTC", BERLIN, NEW_YORK, "Asia/Kolkata", "Etc/GMT+5", "US/Eastern"])
def test_valid_timezones(name: str) -> None:
    assert validate_timezone(name) == ZoneInfo(name)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "local",
        "localtime",
        "Factory",
        "Europe/Nowhere",
        "europe/berlin",
        " UTC",
        "+02:00",
        "../../etc/passwd",
        "/usr/share/zoneinfo/UTC",
        "posix/Europe/Berlin",
        "right/UTC",
    ],
)
def test_invalid_timezones(name: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_timezone(name)
    assert caught.value.field == "timezone"


def test_next_fire_validates_its_inputs() -> None:
    with pytest.raises(InvalidInput, match="schedule"):
        next_fire("@reboot", "UTC", utc(2026, 1, 1))
    with pytest.raises(InvalidInput) as caught:
        next_fire("* * * * *", "Mars/Olympus", utc(2026, 1, 1))
    assert caught.value.field == "timezone"
    with pytest.raises(ValueError, match="timezone-aware"):
        next_fire("* * * * *", "UTC", datetime(2026, 1, 1))


# --- next fire across DST -----------------------------------------------------------------------

DST_CASES = [
    # Berlin spring forward 2026-03-29 02:00 CET -> 03:00 CEST (01:00Z).
    ("30 2 * * *", BERLIN, utc(2026, 3, 28, 12), ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"]),
    ("0 2,3 * * *", BERLIN, utc(2026, 3, 28, 12), ["2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00"]),
    (
        "*/30 2 * * *",
        BERLIN,
        utc(2026, 3, 28, 12),
        ["2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00"],
    ),
    ("30 * * * *", BERLIN, utc(2026, 3, 29, 0), ["2026-03-29T01:30:00+01:00", "2026-03-29T03:30:00+02:00"]),
    (
        "0 * * * *",
        BERLIN,
        utc(2026, 3, 28, 23, 30),
        ["2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"],
    ),
    (
        "*/15 * * * *",
        BERLIN,
        utc(2026, 3, 29, 0, 40),
        ["2026-03-29T01:45:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:15:00+02:00"],
    ),
    # Berlin fall back 2026-10-25 03:00 CEST -> 02:00 CET (01:00Z): 02:00-02:59 happens twice.
    ("30 2 * * *", BERLIN, utc(2026, 10, 24, 12), ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]),
    ("30 2 * * *", BERLIN, utc(2026, 10, 25, 0, 30), ["2026-10-26T02:30:00+01:00"]),
    (
        "*/30 2 * * *",
        BERLIN,
        utc(2026, 10, 24, 23),
        ["2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00"],
    ),
    (
        "0 * * * *",
        BERLIN,
        utc(2026, 10, 24, 22, 30),
        [
            "2026-10-25T01:00:00+02:00",
            "2026-10-25T02:00:00+02:00",
            "2026-10-25T02:00:00+01:00",
            "2026-10-25T03:00:00+01:00",
        ],
    ),
    (
        "*/15 * * * *",
        BERLIN,
        utc(2026, 10, 25, 0, 40),
        ["2026-10-25T02:45:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T02:15:00+01:00"],
    ),
    # After the first pass of the repeated hour, an interval still has the second pass to come.
    ("*/15 * * * *", BERLIN, utc(2026, 10, 25, 0, 50), ["2026-10-25T02:00:00+01:00"]),
    # New York spring forward 2026-03-08 02:00 EST -> 03:00 EDT (07:00Z).
    ("30 2 * * *", NEW_YORK, utc(2026, 3, 7, 17), ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"]),
    (
        "0 * * * *",
        NEW_YORK,
        utc(2026, 3, 8, 5, 30),
        ["2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"],
    ),
    # New York fall back 2026-11-01 02:00 EDT -> 01:00 EST (06:00Z): 01:00-01:59 happens twice.
    (
        "30 1 * * *",
        NEW_YORK,
        utc(2026, 10, 31, 17),
        ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"],
    ),
    (
        "30 2 * * *",
        NEW_YORK,
        utc(2026, 10, 31, 17),
        ["2026-11-01T02:30:00-05:00", "2026-11-02T02:30:00-05:00"],
    ),
    (
        "0 * * * *",
        NEW_YORK,
        utc(2026, 11, 1, 4, 30),
        [
            "2026-11-01T01:00:00-04:00",
            "2026-11-01T01:00:00-05:00",
            "2026-11-01T02:00:00-05:00",
        ],
    ),
    (
        "*/15 * * * *",
        NEW_YORK,
        utc(2026, 11, 1, 5, 40),
        ["2026-11-01T01:45:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:15:00-05:00"],
    ),
]


@pytest.mark.parametrize(("schedule", "tz", "after", "expected"), DST_CASES)
def test_occurrences_across_dst(schedule: str, tz: str, after: datetime, expected: list[str]) -> None:
    got = occurrences_between(schedule, tz, after, after + timedelta(days=3), len(expected))
    assert fmt(got, tz) == expected
    assert got[0] == next_fire(schedule, tz, after)
    assert all(t.tzinfo is UTC for t in got)


@pytest.mark.parametrize(
    ("tz", "day", "hours"),
    [
        (BERLIN, date(2026, 3, 29), 23),
        (BERLIN, date(2026, 10, 25), 25),
        (NEW_YORK, date(2026, 3, 8), 23),
        (NEW_YORK, date(2026, 11, 1), 25),
        (BERLIN, date(2026, 7, 1), 24),
    ],
)
def test_hourly_fires_once_per_real_hour(tz: str, day: date, hours: int) -> None:
    zone = ZoneInfo(tz)
    start = datetime(day.year, day.month, day.day, tzinfo=zone) - timedelta(microseconds=1)
    end = datetime.combine(day + timedelta(days=1), datetime.min.time(), zone) - timedelta(microseconds=1)
    fires = occurrences_between("0 * * * *", tz, start, end, 100)
    assert len(fires) == hours
    assert {b - a for a, b in pairwise(fires)} == {timedelta(hours=1)}
    quarter = occurrences_between("*/15 * * * *", tz, start, end, 1000)
    assert len(quarter) == 4 * hours
    assert {b - a for a, b in pairwise(quarter)} == {timedelta(minutes=15)}


def test_next_fire_takes_after_in_any_zone() -> None:
    tokyo = utc(2026, 3, 28, 12).astimezone(ZoneInfo("Asia/Tokyo"))
    assert next_fire("30 2 * * *", BERLIN, tokyo) == utc(2026, 3, 29, 1)
    assert next_fire("0 0 * * *", "UTC", utc(2026, 1, 1)) == utc(2026, 1, 2)  # strictly after
    assert next_fire("@yearly", "Asia/Kolkata", utc(2026, 6, 1)) == utc(2026, 12, 31, 18, 30)


def test_occurrences_between_is_half_open_and_capped() -> None:
    got = occurrences_between("*/5 * * * *", "UTC", utc(2026, 1, 1, 10), utc(2026, 1, 1, 10, 20), 100)
    assert got == [utc(2026, 1, 1, 10, m) for m in (5, 10, 15, 20)]
    assert occurrences_between("*/5 * * * *", "UTC", utc(2026, 1, 1, 10), utc(2026, 1, 1, 11), 2) == got[:2]
    assert occurrences_between("*/5 * * * *", "UTC", utc(2026, 1, 1, 11), utc(2026, 1, 1, 10), 9) == []


# --- properties ---------------------------------------------------------------------------------

schedules = st.builds(
    " ".join,
    st.tuples(
        st.sampled_from(["0", "30", "59", "*/15", "5,35", "0-10/5", "*/20", "*"]),
        st.sampled_from(["*", "*/1", "0-23", "2", "1,2,3", "*/2", "0", "23", "1-3"]),
        # Mostly "*" for the day fields, so that DST transition days are often among the matches.
        st.sampled_from(["*", "*", "*", "1", "15", "1-7", "29"]),
        st.sampled_from(["*", "*", "*", "3,10", "*/2", "4,9"]),
        st.sampled_from(["*", "*", "*", "0", "1-5", "sun,sat"]),
    ),
)
instants = st.datetimes(datetime(1995, 1, 1), datetime(2035, 1, 1), timezones=st.just(UTC))


@st.composite
def near_transitions(draw: st.DrawFn) -> tuple[str, datetime]:
    tz = draw(st.sampled_from(DST_ZONES))
    changes = transitions(tz, draw(st.integers(2016, 2030)))
    return tz, draw(st.sampled_from(changes)) + MINUTE * draw(st.integers(-240, 120))


@settings(max_examples=150, deadline=None)
@given(schedule=schedules, tz=st.sampled_from(ZONES), after=instants)
def test_fires_increase_and_read_as_the_schedule(schedule: str, tz: str, after: datetime) -> None:
    zone, match, interval = ZoneInfo(tz), matcher(schedule), is_interval(schedule)
    fires = occurrences_between(schedule, tz, after, after + timedelta(days=800), 30)
    assert fires, "every accepted schedule fires"
    assert fires[0] == next_fire(schedule, tz, after) > after
    assert all(a < b for a, b in pairwise(fires))
    assert all(next_fire(schedule, tz, a) == b for a, b in pairwise(fires))
    for fire in fires:
        local = fire.astimezone(zone)
        wall = local.replace(tzinfo=None)
        if match(wall):
            repeated = local.fold == 1 and wall.replace(tzinfo=zone, fold=0).utcoffset() != local.utcoffset()
            assert interval or not repeated, "an appointment fires only the first pass of a repeated time"
        else:  # only an appointment skipped by a gap fires off-schedule, at the gap's end
            assert not interval and offset_changes_at(fire, zone)


@settings(max_examples=150, deadline=None)
@given(schedule=schedules, zone_and_after=near_transitions())
def test_matches_brute_force_around_transitions(schedule: str, zone_and_after: tuple[str, datetime]) -> None:
    tz, after = zone_and_after
    until = after + timedelta(hours=6)
    assert occurrences_between(schedule, tz, after, until, 10_000) == brute_force(schedule, tz, after, until)


@settings(max_examples=60, deadline=None)
@given(
    zone_and_after=near_transitions(),
    schedule=st.sampled_from(["*/15 * * * *", "*/5 * * * *", "* * * * *", "0,15,30,45 0-23 * * *"]),
)
def test_intervals_keep_real_time_spacing(zone_and_after: tuple[str, datetime], schedule: str) -> None:
    tz, after = zone_and_after
    fires = occurrences_between(schedule, tz, after, after + timedelta(hours=6), 10_000)
    steps = {b - a for a, b in pairwise(fires)}
    assert len(steps) == 1


@settings(max_examples=40, deadline=None)
@given(
    tz=st.sampled_from(ZONES),
    year=st.integers(2000, 2035),
    hour=st.integers(0, 23),
    minute=st.integers(0, 59),
)
def test_daily_fires_once_per_local_day(tz: str, year: int, hour: int, minute: int) -> None:
    zone = ZoneInfo(tz)
    start = datetime(year, 1, 1, tzinfo=zone) - timedelta(microseconds=1)
    end = datetime(year + 1, 1, 1, tzinfo=zone) - timedelta(microseconds=1)
    fires = occurrences_between(f"{minute} {hour} * * *", tz, start, end, 1000)
    days = [f.astimezone(zone).date() for f in fires]
    assert days == [
        date(year, 1, 1) + timedelta(days=n) for n in range((date(year + 1, 1, 1) - date(year, 1, 1)).days)
    ]
    for fire in fires:
        local = fire.astimezone(zone)
        if (local.hour, local.minute) != (hour, minute):  # moved forward out of a gap
            assert offset_changes_at(fire, zone) and (local.hour, local.minute) > (hour, minute)
        else:
            assert local.fold == 0


# --- misfire policies ---------------------------------------------------------------------------

EVERY_5 = "*/5 * * * *"
# The engine last materialized 10:00 and was down for an hour.
STORED, BACK = utc(2026, 1, 1, 10, 5), utc(2026, 1, 1, 11)
HOUR = timedelta(hours=1)


def due(misfire: Misfire, now: datetime = BACK, catchup: timedelta = HOUR, limit: int = 100, **kw: timedelta):
    return due_occurrences(EVERY_5, "UTC", STORED, now, misfire, catchup, limit, **kw)


def test_latest_fires_the_most_recent_once() -> None:
    assert due("latest") == ([BACK], utc(2026, 1, 1, 11, 5))
    assert due("latest", now=BACK + 2 * MINUTE) == ([BACK], utc(2026, 1, 1, 11, 5))


def test_all_fires_every_missed_within_catchup() -> None:
    fired, following = due("all")
    assert fired == [utc(2026, 1, 1, 10, m) for m in range(5, 60, 5)] + [BACK]
    assert len(fired) == 12 and following == utc(2026, 1, 1, 11, 5)
    fired, _ = due("all", catchup=timedelta(minutes=20))
    assert fired == [utc(2026, 1, 1, 10, m) for m in (40, 45, 50, 55)] + [BACK]
    assert due("all", limit=3)[0] == [utc(2026, 1, 1, 10, 50), utc(2026, 1, 1, 10, 55), BACK]


def test_skip_fires_only_what_is_on_time() -> None:
    assert due("skip", now=BACK + 2 * MINUTE) == ([], utc(2026, 1, 1, 11, 5))
    assert due("skip", now=BACK + timedelta(seconds=30)) == ([BACK], utc(2026, 1, 1, 11, 5))
    assert due("skip", now=BACK + ON_TIME_TOLERANCE) == ([BACK], utc(2026, 1, 1, 11, 5))
    assert due("skip", now=BACK + 2 * MINUTE, on_time_tolerance=3 * MINUTE)[0] == [BACK]


@pytest.mark.parametrize("misfire", ["latest", "all", "skip"])
def test_nothing_due_before_next_fire_at(misfire: Misfire) -> None:
    assert due(misfire, now=STORED - timedelta(seconds=1)) == ([], STORED)
    assert due(misfire, now=STORED) == ([STORED], STORED + 5 * MINUTE)


def test_latest_after_a_long_outage_and_across_dst() -> None:
    fired, following = due_occurrences(
        "* * * * *", "UTC", utc(2026, 1, 1), utc(2026, 3, 1, 12, 0, 30), "latest", HOUR, 10
    )
    assert (fired, following) == ([utc(2026, 3, 1, 12)], utc(2026, 3, 1, 12, 1))
    fired, following = due_occurrences(
        "0 0 1 * *", BERLIN, utc(2026, 1, 1), utc(2026, 3, 15), "latest", HOUR, 10
    )
    assert (fired, following) == ([utc(2026, 2, 28, 23)], utc(2026, 3, 31, 22))
    gap_end = utc(2026, 3, 29, 1)  # "30 2" on the spring-forward day fires at 03:00 CEST
    now = gap_end + timedelta(seconds=5)
    assert due_occurrences("30 2 * * *", BERLIN, gap_end, now, "skip", HOUR, 10) == (
        [gap_end],
        utc(2026, 3, 30, 0, 30),
    )


def test_due_occurrences_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="misfire"):
        due("never")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit"):
        due("all", limit=0)
    with pytest.raises(ValueError, match="timezone-aware"):
        due("all", now=datetime(2026, 1, 1, 11))


@settings(max_examples=150, deadline=None)
@given(
    schedule=schedules,
    tz=st.sampled_from(ZONES),
    start=instants,
    down=st.integers(0, 12 * 3600),
    misfire=st.sampled_from(["latest", "all", "skip"]),
    catchup=st.integers(0, 6 * 3600),
    limit=st.integers(1, 40),
)
def test_due_occurrences_match_their_definition(
    schedule: str, tz: str, start: datetime, down: int, misfire: Misfire, catchup: int, limit: int
) -> None:
    stored = next_fire(schedule, tz, start)
    now = stored + timedelta(seconds=down)
    missed = [stored, *occurrences_between(schedule, tz, stored, now, 100_000)]
    window = {"latest": None, "all": timedelta(seconds=catchup), "skip": ON_TIME_TOLERANCE}[misfire]
    expected = missed[-1:] if window is None else [t for t in missed if now - t <= window][-limit:]
    assert due_occurrences(schedule, tz, stored, now, misfire, timedelta(seconds=catchup), limit) == (
        expected,
        next_fire(schedule, tz, now),
    )
