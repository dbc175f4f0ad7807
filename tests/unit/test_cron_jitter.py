"""A cron occurrence's jitter (app.services.cron.jittered): the occurrence's own offset, the same
every time it is computed, within [0, jitter_seconds), spread over that range."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.services.cron import MAX_JITTER_SECONDS, jittered, occurrences_between

START = datetime(2030, 1, 1, tzinfo=UTC)


def occurrences(n: int) -> list[datetime]:
    return occurrences_between("* * * * *", "UTC", START, START + timedelta(days=2), n)


def test_no_jitter_is_the_occurrence_itself() -> None:
    for at in occurrences(10):
        assert jittered("acme", "report", at, 0) is at


@pytest.mark.parametrize("jitter", [1, 7, 60, MAX_JITTER_SECONDS])
def test_each_offset_is_within_bounds_and_the_same_every_time(jitter: int) -> None:
    for at in occurrences(1000):
        moved = jittered("acme", "report", at, jitter)
        assert timedelta(0) <= moved - at < timedelta(seconds=jitter)
        assert moved.tzinfo is not None
        # The same occurrence, given in another zone or computed again, gets the same time.
        assert jittered("acme", "report", at.astimezone(timezone(timedelta(hours=5))), jitter) == moved
        assert jittered("acme", "report", at, jitter) == moved


def test_offsets_spread_over_the_range_and_differ_by_job_and_tenant() -> None:
    ats = occurrences(1000)
    offsets = [(jittered("acme", "report", at, 600) - at).total_seconds() for at in ats]
    assert len(set(offsets)) == len(offsets)  # no two occurrences share an offset
    tenths = {int(o // 60) for o in offsets}
    assert tenths == set(range(10))  # every tenth of the range is used
    assert 250 < sum(offsets) / len(offsets) < 350  # about the middle on average
    at = ats[0]
    others = {jittered(t, j, at, 600) for t, j in [("acme", "report"), ("acme", "other"), ("beta", "report")]}
    assert len(others) == 3


def test_a_naive_occurrence_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        jittered("acme", "report", datetime(2030, 1, 1), 60)
