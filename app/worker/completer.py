"""Recording outcomes: a group commit (one statement records many, then their messages are acked,
so a run's message is acked only after its outcome is durable).

A batch that fails for a reason retrying cannot fix is split in halves until the rows at fault are
alone; the others commit. Retrying the whole batch every second, one run whose error Postgres
refused (a NUL) once held every other tenant's outcomes behind it indefinitely."""

from __future__ import annotations

import asyncio
import logging
import time

import asyncpg

from app.bus.hot_index import HotIndex
from app.db import dispatch as dispatch_repo
from app.db.dispatch import Fence
from app.db.errors import is_transient
from app.telemetry import metrics
from app.worker.delivery import Delivery

log = logging.getLogger(__name__)
FLUSH_MAX = 500
FLUSH_DELAY = 0.002  # seconds an outcome may wait for company in the group commit


class Completer:
    def __init__(self, pool: asyncpg.Pool, hot_index: HotIndex | None):
        self.pool = pool
        self.hot_index = hot_index
        self.unrecorded: list[Delivery] = []  # outcomes not yet durable, oldest first
        self._wake = asyncio.Event()

    def add(self, d: Delivery) -> None:
        self.unrecorded.append(d)
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            await asyncio.sleep(FLUSH_DELAY)
            self._wake.clear()
            await self.flush()

    async def flush(self, deadline: float | None = None) -> bool:
        """Record every outcome, waiting out transient errors (until `deadline`, if one is given).
        True when nothing is left unrecorded. The batch leaves the list only once recorded, so a
        flush cancelled midway loses nothing (a repeated write matches nothing: it is fenced)."""
        while self.unrecorded:
            batch = self.unrecorded[:FLUSH_MAX]
            try:
                # A write blocked (on a lock, on a database that stopped answering) is bounded too.
                async with asyncio.timeout(None if deadline is None else deadline - time.monotonic()):
                    await self._record_isolating(batch)
            except Exception as exc:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    log.warning("giving up on %d unrecorded outcomes: %s", len(self.unrecorded), exc)
                    return False
                log.warning("recording %d outcomes failed: %s; retrying", len(batch), exc)
                await asyncio.sleep(1.0 if left is None else min(1.0, left))
                continue
            del self.unrecorded[: len(batch)]
        return True

    async def _record_isolating(self, batch: list[Delivery]) -> None:
        try:
            await self._record(batch)
        except Exception as exc:
            if is_transient(exc):
                raise
            if len(batch) > 1:
                half = len(batch) // 2
                await self._record_isolating(batch[:half])
                await self._record_isolating(batch[half:])
                return
            await self._record_alone(batch[0], exc)

    async def _record_alone(self, d: Delivery, exc: Exception) -> None:
        """The one outcome Postgres refuses: recorded as a failed attempt saying why."""
        log.error("run %s: its outcome could not be recorded: %r", d.run.run_id, exc)
        d.fail(f"the outcome could not be recorded: {type(exc).__name__}: {exc}")
        try:
            await self._record([d])
        except Exception as again:
            if is_transient(again):
                raise
            # Not even that: its lease lapses and the reaper retries or fails the run.
            log.error("run %s: left to the lease reaper: %r", d.run.run_id, again)
            metrics.unexpected_errors_total.labels("record").inc()
            await _quietly(d.msg.term())

    async def _record(self, batch: list[Delivery]) -> None:
        async with self.pool.acquire() as conn:
            rows = await dispatch_repo.finish_runs(
                conn, Fence([d.fence() for d in batch]), [d.ok for d in batch], [d.error for d in batch]
            )
        recorded = {r["id"] for r in rows}
        for row in rows:
            metrics.run_outcomes_total.labels(row["status"]).inc()
        stale = len(batch) - len(recorded)
        if stale:
            # The run was rescued while this worker ran it: the late result is discarded.
            metrics.stale_results_total.labels("finish").inc(stale)
        for d in batch:
            await _quietly(d.msg.ack())
        if self.hot_index is not None:
            await self.hot_index.add([r for r in rows if r["status"] == "pending"])


async def _quietly(awaitable: object) -> None:
    """Acks and naks are best effort: a lost ack means a redelivery, which the epoch fence drops."""
    try:
        await awaitable  # type: ignore[misc]
    except Exception as exc:
        log.debug("nats ack/nak failed: %s", exc)
