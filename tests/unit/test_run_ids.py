"""Run ids carry their partition; an id no run can have still has bounds (a lookup then finds
nothing: a 404, never an OverflowError)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from app.db.run_ids import bounds_of, possible, scheduled_bounds

IMPOSSIBLE = UUID("ffffffff-ffff-ffff-ffff-ffffffffffff")  # leading bits past year 9999


def test_an_id_names_the_millisecond_of_its_run() -> None:
    at = datetime(2026, 12, 4, 10, 30, 0, 123000, tzinfo=UTC)
    ms = int(at.timestamp() * 1000)
    run_id = UUID(int=(ms << 80) | 0x7000_8000_0000_0000_0000)
    lo, hi = scheduled_bounds(run_id)
    assert lo == at and (hi - lo).total_seconds() == 0.001
    assert possible(run_id)


def test_an_id_past_year_9999_has_bounds_but_no_run() -> None:
    assert not possible(IMPOSSIBLE)
    lo, hi = scheduled_bounds(IMPOSSIBLE)
    assert lo.year == 9999 and lo < hi
    earlier = UUID(int=1 << 80)
    assert bounds_of([earlier, IMPOSSIBLE]) == (scheduled_bounds(earlier)[0], hi)
