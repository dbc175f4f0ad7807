"""The claim's partition bounds: from the oldest unfinished run (the floor) to the database's clock
plus a margin (the ceiling).

Without a floor a due scan probes DEFAULT and every older partition, whose count grows with history;
without a plan-time ceiling it keeps DEFAULT and every premade future day in the plan, and holds
locks on them that block partition DDL. Both are read from Postgres every second (one clock: the
ceiling is the database's now() advanced by this process's monotonic clock). A NOTIFY from a
submission of an older run lowers the floor at once, and a lowering that races a re-read is not
lost (the smaller of the two wins).

A pending run may be due before its scheduled_at (a reschedule or a retry pulled it forward; its id
and partition keep scheduled_at). The ceiling then reaches up to the latest such scheduled_at: read
with the floor every second, and raised at once by the NOTIFY of the reschedule or retry, whose
payload is that scheduled_at. The claim's runs are then found in those extra days by id."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import asyncpg

from app.db import transitions

CEILING_MARGIN = timedelta(seconds=2)


class ClaimBounds:
    def __init__(self, refresh_seconds: float = 1.0):
        self.refresh_seconds = refresh_seconds
        self._floor: datetime | None = None
        self._reach: datetime | None = None  # latest scheduled_at of a run pulled forward
        self._db_now: datetime | None = None
        self._read_at = 0.0
        self._lowered_during_read: datetime | None = None
        self._raised_during_read: datetime | None = None

    def include(self, at: datetime) -> None:
        """A run scheduled at `at` is due: the bounds must hold it (lower the floor or raise the reach)."""
        if self._floor is not None and at < self._floor:
            self._floor = at
        if self._lowered_during_read is None or at < self._lowered_during_read:
            self._lowered_during_read = at
        if self._reach is None or at > self._reach:
            self._reach = at
        if self._raised_during_read is None or at > self._raised_during_read:
            self._raised_during_read = at

    async def get(self, conn: asyncpg.Connection) -> tuple[datetime, datetime]:
        """(floor, ceiling) for the next claim."""
        if self._floor is None or time.monotonic() - self._read_at > self.refresh_seconds:
            self._lowered_during_read = self._raised_during_read = None
            read_at = time.monotonic()
            floor, self._db_now, reach = await transitions.claim_range(conn)
            lowered, raised = self._lowered_during_read, self._raised_during_read
            self._floor = min(floor, lowered) if lowered is not None else floor
            self._reach = max(r for r in (reach, raised) if r is not None) if reach or raised else None
            self._read_at = read_at
        assert self._floor is not None and self._db_now is not None
        elapsed = timedelta(seconds=time.monotonic() - self._read_at)
        ceiling = self._db_now + elapsed
        if self._reach is not None and self._reach > ceiling:
            ceiling = self._reach
        return self._floor, ceiling + CEILING_MARGIN
