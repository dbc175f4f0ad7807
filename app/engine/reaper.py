"""The lease reaper: rescues runs whose lease lapsed. SKIP LOCKED makes any number of replicas safe.

A dispatched run past its lease never started (its engine died before publishing, or its message was
lost): back to pending, no attempt consumed. A running run past its lease lost its worker: the attempt
is consumed, then it is retried with backoff or failed. It also refreshes the database-read gauges."""

from __future__ import annotations

import asyncio
import logging

import asyncpg

from app.bus.hot_index import HotIndex
from app.config import Settings
from app.db import dispatch as dispatch_repo
from app.engine.loop import every
from app.telemetry import metrics

log = logging.getLogger(__name__)
BATCH = 1000


class Reaper:
    def __init__(self, settings: Settings, pool: asyncpg.Pool, hot_index: HotIndex | None = None):
        self.settings = settings
        self.pool = pool
        self.hot_index = hot_index

    async def reap_once(self) -> int:
        rescued = 0
        async with self.pool.acquire() as conn:
            while True:
                rows = await dispatch_repo.reap_dispatched_runs(conn, BATCH)
                metrics.runs_reaped_total.labels("dispatched", "pending").inc(len(rows))
                rescued += len(rows)
                await self._rehint(rows)
                if len(rows) < BATCH:
                    break
            while True:
                rows = await dispatch_repo.reap_running_runs(conn, BATCH)
                for row in rows:
                    metrics.runs_reaped_total.labels("running", row["status"]).inc()
                rescued += len(rows)
                await self._rehint([r for r in rows if r["status"] == "pending"])
                if len(rows) < BATCH:
                    break
            metrics.oldest_due_pending_age_seconds.set(await dispatch_repo.oldest_due_pending_age(conn))
        if rescued:
            log.info("reaper rescued %d runs", rescued)
        return rescued

    async def _rehint(self, rows: list[asyncpg.Record]) -> None:
        if self.hot_index is not None and rows:
            await self.hot_index.add(rows)

    async def run(self, stop: asyncio.Event) -> None:
        await every(stop, self.settings.reap_interval_seconds, self.reap_once, "reaper")
