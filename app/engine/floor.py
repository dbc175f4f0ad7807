"""The claim floor: the scheduled_at of the oldest unfinished run, the claim's lower partition bound.

Without it a due scan probes DEFAULT and every older partition, whose count grows with history.
The floor is re-read from Postgres every second; a NOTIFY from a submission of an older run lowers
it at once, and a lowering that races a re-read is not lost (the smaller of the two wins)."""

from __future__ import annotations

import time
from datetime import datetime

import asyncpg

from app.db import dispatch as dispatch_repo


class ClaimFloor:
    def __init__(self, refresh_seconds: float = 1.0):
        self.refresh_seconds = refresh_seconds
        self._floor: datetime | None = None
        self._read_at = 0.0
        self._lowered_during_read: datetime | None = None

    def lower(self, at: datetime) -> None:
        if self._floor is not None and at < self._floor:
            self._floor = at
        if self._lowered_during_read is None or at < self._lowered_during_read:
            self._lowered_during_read = at

    async def get(self, conn: asyncpg.Connection) -> datetime:
        if self._floor is None or time.monotonic() - self._read_at > self.refresh_seconds:
            self._lowered_during_read = None
            read = await dispatch_repo.claim_floor(conn)
            lowered = self._lowered_during_read
            self._floor = min(read, lowered) if lowered is not None else read
            self._read_at = time.monotonic()
        return self._floor
