"""The flow keeper: grants freed concurrency slots to waiting runs (their job key's and their
tenant's max_in_flight, both at once), holds runs of paused jobs and tenants that became pending
after the pause (a retry, a rescued run), and runs of a limited tenant submitted in the instant its
limit was set.

Held runs are out of the claim's range (migration 0010), so the claim never reads them; this is
the one place that looks at them, and its cost follows the keys with waiting runs (one index probe
each), not the runs they hold back. Slots are granted under a row lock per key
(app.db.flow.grant_concurrency_slots), so any number of engines can run a keeper: a key one of
them is granting is skipped by the others, and none can grant more than the key's limit. Slots are
freed inside the fenced statements that end an attempt (the trigger of migration 0010), never here.
"""

from __future__ import annotations

import asyncio

import asyncpg

from app.config import Settings
from app.db import flow as flow_repo
from app.db import wakeups
from app.db.flow import Key
from app.domain import Hints, on_pending
from app.engine.loop import every
from app.telemetry import metrics

# Keys granted per pass; a pass that reaches it continues from there on the next one, so every key
# is served in turn however many there are.
KEYS_PER_PASS = 500
FIRST = Key("", "", "")  # before every key: tenant ids are never empty


class FlowKeeper:
    def __init__(self, settings: Settings, pool: asyncpg.Pool, hot_index: Hints | None = None):
        self.settings = settings
        self.pool = pool
        self.on_pending = on_pending(hot_index)
        self._after = FIRST

    async def run_once(self) -> int:
        """One pass; returns how many runs were granted a slot."""
        async with self.pool.acquire() as conn:
            reheld = await flow_repo.rehold_paused_runs(conn)
            reheld += await flow_repo.rehold_tenant_limited_runs(conn)
            keys = await flow_repo.waiting_concurrency_keys(conn, self._after, KEYS_PER_PASS)
            self._after = keys[-1] if len(keys) == KEYS_PER_PASS else FIRST
            granted = await flow_repo.grant_concurrency_slots(conn, keys) if keys else []
            if granted:
                await wakeups.notify_runs_due(conn, min(r["scheduled_at"] for r in granted))
        metrics.runs_reheld_total.inc(reheld)
        metrics.concurrency_slots_granted_total.inc(len(granted))
        await self.on_pending(granted)
        return len(granted)

    async def run(self, stop: asyncio.Event) -> None:
        await every(stop, self.settings.keeper_interval_seconds, self.run_once, "keeper")
