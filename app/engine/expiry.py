"""The expiry sweep: runs not started by their deadline (`expires_at`) end `expired`, no attempt
consumed, whether pending, held or dispatched.

The claim never pays for deadlines. The worker's start already refuses a run past its deadline (it
ends expired in that statement, so none starts late); this pass ends the others, that no statement
touches in time: runs still pending or held, and runs whose message waits in the stream. It reads
the partial index run_queue_expiring (migration 0019), which holds only the runs with a deadline
still to meet, so a pass costs one index probe when nothing is due to expire, however many runs are
waiting. Every SCHEDULER_EXPIRE_INTERVAL_SECONDS (1 s): a run is seen expired at most about that
long after its deadline (plus the jitter of its interval, ±20 %). Any number of engines sweep at once:
the runs are taken with SKIP LOCKED (app/db/transitions.sql: expire_runs), so they split the work.
"""

from __future__ import annotations

import logging

import asyncpg

from app.background import Periodic
from app.config import Settings
from app.db import transitions
from app.db.connection import planned_generically
from app.telemetry import metrics

log = logging.getLogger(__name__)
BATCH = 1000


class RunExpiry(Periodic):
    name = "expiry"

    def __init__(self, settings: Settings, pool: asyncpg.Pool):
        self.settings = settings
        self.pool = pool
        self.interval = settings.expire_interval_seconds

    async def step(self) -> int:
        """Ends every run past its deadline, a batch per statement, until one ends none (a batch cut
        short by another engine's locks goes on: the other sweep has taken those); how many."""
        expired = 0
        async with self.pool.acquire() as conn:
            while True:
                async with planned_generically(conn):
                    n = await transitions.expire_runs(conn, BATCH)
                if not n:
                    break
                metrics.runs_expired_total.labels("sweep").inc(n)
                expired += n
        if expired:
            log.info("expired %d runs not started by their deadline", expired)
        return expired
