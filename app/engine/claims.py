"""Which claim an engine makes for its next batch: the hot index's hinted claim while the index
serves, else the scan of the due runs (app/db/transitions.sql: claim_due_runs), within a band of priorities.

This is the one place the claim meets the Redis hot index (app/bus/hot_index.py, off by default),
through `Hints`; the index learns of pending runs from the domain event (app/pending.py).

The scan is the truth; the index only saves it work. With the index on, the scan still runs once a
second: runs whose hint was lost (Redis down or wiped when they were submitted) would otherwise wait
until the index ran dry.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, Protocol
from uuid import UUID

import asyncpg

from app.config import Settings
from app.db import transitions
from app.domain import LEAST_URGENT
from app.engine.floor import ClaimBounds
from app.telemetry import metrics

SCAN_EVERY_SECONDS = 1.0
Priorities = tuple[int, int]  # the most and the least urgent priority a claim takes
EVERY_PRIORITY: Priorities = (0, LEAST_URGENT)


class Hints(Protocol):
    """Due run ids held outside Postgres (app.bus.hot_index.HotIndex): a hint, never the truth."""

    async def pop_due(self, now: float, limit: int) -> list[UUID] | None: ...

    async def discard(self, run_ids: Iterable[Any]) -> None: ...

    async def add(self, runs: Iterable[Any]) -> None: ...


class Claims:
    def __init__(self, settings: Settings, bounds: ClaimBounds, hints: Hints | None = None):
        self.settings = settings
        self.bounds = bounds
        self.hints = hints
        self.last_scan = 0.0

    async def claim(
        self, conn: asyncpg.Connection, priorities: Priorities = EVERY_PRIORITY
    ) -> list[asyncpg.Record]:
        """Due runs whose priority is within `priorities`, most urgent first."""
        # The index knows no priority: a claim of urgent runs only always scans, and a hinted claim
        # may take an urgent run too (it is sent to the urgent lane all the same).
        every_priority = priorities[1] == LEAST_URGENT
        if (
            self.hints is not None
            and every_priority
            and time.monotonic() - self.last_scan < SCAN_EVERY_SECONDS
        ):
            claimed = await self._claim_hinted(conn)
            if claimed is not None:
                return claimed
        if every_priority:  # a scan of urgent runs only finds no lost hint of the rest
            self.last_scan = time.monotonic()
        started = time.perf_counter()
        rows = await claim_scan(conn, self.settings, self.bounds, priorities)
        metrics.claim_duration_seconds.labels("scan").observe(time.perf_counter() - started)
        if self.hints is not None:
            await self.hints.discard(r["id"] for r in rows)
        return rows

    async def _claim_hinted(self, conn: asyncpg.Connection) -> list[asyncpg.Record] | None:
        """The hot path. None sends the caller to the scan: the index is empty, wiped or unreachable,
        one tenant crowds the hinted batch (the scan's fair path then applies the cap), or a more
        urgent due run was not hinted (the scan takes it first)."""
        assert self.hints is not None
        s = self.settings
        started = time.perf_counter()
        ids = await self.hints.pop_due(time.time(), s.batch_size)
        if not ids:
            metrics.hot_index_events_total.labels("empty" if ids is not None else "fallback").inc()
            return None
        rows = await claim_hinted(conn, s, self.bounds, ids)
        metrics.claim_duration_seconds.labels("hot").observe(time.perf_counter() - started)
        metrics.hot_index_events_total.labels("hit").inc(len(rows))
        if len(rows) == len(ids):
            return rows
        # Hints not claimed: stale ones (no longer pending) are forgotten, live ones go back.
        taken = {r["id"] for r in rows}
        still_pending = await transitions.pending_among(conn, [i for i in ids if i not in taken])
        metrics.hot_index_events_total.labels("stale").inc(len(ids) - len(rows) - len(still_pending))
        await self.hints.add(still_pending)
        if not rows:  # all stale, or one tenant crowds the batch: the scan decides this turn
            return None
        return rows


async def claim_scan(
    conn: asyncpg.Connection, settings: Settings, bounds: ClaimBounds, priorities: Priorities = EVERY_PRIORITY
) -> list[asyncpg.Record]:
    """The scan claim with this engine's settings and partition bounds (the bench calls it too)."""
    floor, ceiling = await bounds.get(conn)
    return await transitions.claim_due_runs(
        conn,
        floor=floor,
        ceiling=ceiling,
        per_tenant_cap=settings.per_tenant_cap,
        batch_size=settings.batch_size,
        owner=settings.owner,
        lease_seconds=settings.dispatch_lease_seconds,
        min_priority=priorities[0],
        max_priority=priorities[1],
    )


async def claim_hinted(
    conn: asyncpg.Connection, settings: Settings, bounds: ClaimBounds, ids: list[UUID]
) -> list[asyncpg.Record]:
    """The hinted claim of these run ids with this engine's settings (the bench calls it too)."""
    floor, ceiling = await bounds.get(conn)
    return await transitions.claim_hinted_runs(
        conn,
        ids,
        floor=floor,
        ceiling=ceiling,
        per_tenant_cap=settings.per_tenant_cap,
        owner=settings.owner,
        lease_seconds=settings.dispatch_lease_seconds,
    )
