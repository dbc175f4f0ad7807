"""Sweeping unique and debounce keys (dedupe_keys, migration 0021) that hold nothing any more: a
window that is over, a run that has ended. A key is only ever freed by the submission that finds it
so (under its row lock) or by this sweep, never by the statements that move runs, so the claim and
the outcomes pay nothing for it; without the sweep, a job keyed by a user id would keep a row per
user for good. One engine at a time (an advisory lock); each pass goes on from where the last one
stopped, so every row is looked at in turn however many are in use."""

from __future__ import annotations

import logging

import asyncpg

from app.background import Led
from app.config import Settings
from app.db import locks
from app.db.dedupe import DedupeKey, sweep_dedupe_keys
from app.telemetry import metrics

log = logging.getLogger(__name__)
FIRST = DedupeKey("", "", "")  # before every key: tenant ids are never empty
ROWS_PER_STATEMENT = 1000
# Rows looked at per pass at most: 100,000 a minute at the default SCHEDULER_MAINTENANCE_INTERVAL_SECONDS.
STATEMENTS_PER_PASS = 100


class DedupeKeySweeper(Led[int]):
    name = "dedupe_keys"
    leader = locks.DEDUPE_SWEEP_LOCK_KEY

    def __init__(self, settings: Settings, pool: asyncpg.Pool):
        self.settings = settings
        self.pool = pool
        self.interval = settings.maintenance_interval_seconds
        self._after = FIRST

    async def lead(self, conn: asyncpg.Connection) -> int:
        """One pass; how many keys went."""
        swept = 0
        for _ in range(STATEMENTS_PER_PASS):
            n, after = await sweep_dedupe_keys(conn, self._after, ROWS_PER_STATEMENT)
            swept += n
            self._after = after or FIRST
            if after is None:
                break
        metrics.dedupe_keys_swept_total.inc(swept)
        if swept:
            log.info("swept %d unique and debounce keys that held nothing", swept)
        return swept
