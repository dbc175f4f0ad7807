"""The flow keeper: grants freed concurrency slots and rate limits' room to waiting runs (within
their tenant's max_in_flight, whose slot a run takes in the same grant), and holds runs of paused
jobs and tenants that are pending and unheld all the same: every statement of the service holds them
as it makes them pending (migration 0018), so this catches only a run unheld behind its back (an
operator's own UPDATE).

Held runs are outside the queue rows the claim reads (run_queue state 3), so it never sees them; this is
the one place that looks at them, and its cost follows the keys with waiting runs (one index probe
each), not the runs they hold back. Slots and room are granted under a row lock per key
(app.db.flow.grant), so any number of engines can run a keeper: a key one of them is granting is
skipped by the others, and none can grant more than the key's limit. Slots are freed inside the
fenced statements that end an attempt (the trigger of migration 0010), never here; a rate-limited
key's window is counted from its grants and their starts (migration 0013), and a key without room
is not looked at again before it can have some.

Once a minute it also sweeps the bookkeeping of keys nothing uses any more (a key's lock row, a
window's old starts): a tenant whose key is a customer id names a new key per customer, and without
the sweep each left a row behind for good.
"""

from __future__ import annotations

import time

import asyncpg

from app import pending
from app.background import Periodic
from app.config import Settings
from app.db import flow as flow_repo
from app.db import wakeups
from app.db.connection import planned_generically
from app.db.flow import Key
from app.domain import HeldReason
from app.telemetry import metrics

# Keys granted per pass; a pass that reaches it continues from there on the next one, so every key
# is served in turn however many there are.
KEYS_PER_PASS = 500
FIRST = Key("", "", "")  # before every key: tenant ids are never empty
# What a keyed run waits for; each has its own grant (app.db.flow.GRANTS) and its own key cursor.
WAITING = (HeldReason.CONCURRENCY, HeldReason.RATE_LIMIT)
SWEEP_EVERY_SECONDS = 60.0
SWEEP_BATCH = 1000  # rows deleted, or lock rows looked at, per statement
# Lock rows looked at per sweep at most (each costs an index probe per table that may use its key);
# the next sweep goes on from there: 600,000 rows an hour.
SWEEP_SLOT_BATCHES = 10
GRANTED = {
    HeldReason.CONCURRENCY: metrics.concurrency_slots_granted_total,
    HeldReason.RATE_LIMIT: metrics.rate_limit_grants_total,
}


class FlowKeeper(Periodic):
    name = "keeper"

    def __init__(self, settings: Settings, pool: asyncpg.Pool):
        self.settings = settings
        self.pool = pool
        self.interval = settings.keeper_interval_seconds
        self._after = dict.fromkeys(WAITING, FIRST)
        self._binds: dict[HeldReason, dict[str, object]] = {
            HeldReason.CONCURRENCY: {},
            HeldReason.RATE_LIMIT: {"margin_seconds": settings.rate_limit_margin_seconds},
        }
        self._swept_at = time.monotonic()  # the first sweep a minute after start
        self._sweep_after = FIRST

    async def step(self) -> int:
        """One pass; returns how many runs were granted a slot or room."""
        granted: list[asyncpg.Record] = []
        async with self.pool.acquire() as conn:
            reheld = await flow_repo.rehold_paused_runs(conn)
            async with planned_generically(conn):
                waiting = {
                    held: await flow_repo.waiting_keys(conn, held, self._after[held], KEYS_PER_PASS)
                    for held in WAITING
                }
            for held, keys in waiting.items():
                self._after[held] = keys[-1] if len(keys) == KEYS_PER_PASS else FIRST
                these = await flow_repo.grant(conn, held, keys, **self._binds[held]) if keys else []
                GRANTED[held].inc(len(these))
                granted += these
            if granted:
                await wakeups.notify_runs_due(conn, min(r["scheduled_at"] for r in granted))
        metrics.runs_reheld_total.inc(reheld)
        await pending.runs_pending(granted)
        if time.monotonic() - self._swept_at >= SWEEP_EVERY_SECONDS:
            await self.sweep()
        return len(granted)

    async def sweep(self) -> None:
        """Deletes every window row that left its window, then the lock rows of unused keys among
        the next SWEEP_SLOT_BATCHES batches (the following sweep goes on after them)."""
        self._swept_at = time.monotonic()
        async with self.pool.acquire() as conn:
            margin = self.settings.rate_limit_margin_seconds
            while (n := await flow_repo.sweep_rate_limit_starts(conn, margin, SWEEP_BATCH)) > 0:
                metrics.flow_rows_swept_total.labels("rate_limit_starts").inc(n)
                if n < SWEEP_BATCH:
                    break
            for _ in range(SWEEP_SLOT_BATCHES):
                n, after = await flow_repo.sweep_concurrency_slots(conn, self._sweep_after, SWEEP_BATCH)
                metrics.flow_rows_swept_total.labels("concurrency_slots").inc(n)
                self._sweep_after = after or FIRST
                if after is None:
                    break
