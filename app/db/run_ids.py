"""Run ids carry their partition: the leading 48 bits are scheduled_at in Unix milliseconds
(the UUIDv7 layout; minted in SQL by scheduler_run_id())."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

_MS = timedelta(milliseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# About one random UUID in ten has leading bits past year 9999, a moment Python cannot hold. No run
# has such an id (scheduled_at is bounded far below), so its bounds are clamped to the last
# millisecond Python can: a lookup then finds nothing, and an unknown id is a 404 wherever it comes.
_LAST_MS = (datetime.max.replace(tzinfo=UTC) - _EPOCH) // _MS - 1


def _at(ms: int) -> datetime:
    # Integer arithmetic: a float division could round a bound past the run it should include.
    return _EPOCH + timedelta(milliseconds=min(ms, _LAST_MS))


def possible(run_id: UUID) -> bool:
    """Whether any run can have this id (its leading bits name a moment before year 10000)."""
    return scheduled_ms(run_id) < _LAST_MS


def scheduled_ms(run_id: UUID) -> int:
    return run_id.int >> 80


def scheduled_bounds(run_id: UUID) -> tuple[datetime, datetime]:
    """[lo, hi): the one millisecond, and so the one partition, that holds this run."""
    lo = _at(scheduled_ms(run_id))
    return lo, lo + _MS


def bounds_of(run_ids: list[UUID]) -> tuple[datetime, datetime]:
    """[lo, hi) covering every id, so a multi-id statement prunes to the days they name."""
    ms = [scheduled_ms(r) for r in run_ids]
    return _at(min(ms)), _at(max(ms)) + _MS
