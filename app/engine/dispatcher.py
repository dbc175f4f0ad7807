"""The claim loop: claim a batch, publish it pipelined, mark what JetStream acked, release the rest.

A run due now is dispatched within a second: submissions NOTIFY idle engines, and the loop polls
with a short jittered sleep otherwise (the jitter keeps replicas from synchronizing their claims).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg
from nats.js import JetStreamContext
from opentelemetry.trace import SpanKind

from app.bus.hot_index import HotIndex
from app.bus.jetstream import Outgoing, publish_pipelined
from app.bus.message import RunMessage
from app.config import Settings
from app.db import dispatch as dispatch_repo
from app.db.dispatch import Fence
from app.db.runs import DUE_CHANNEL
from app.engine.floor import ClaimFloor
from app.engine.loop import sleep_or_stop
from app.telemetry import metrics
from app.telemetry.tracing import inject, link_to, tracer

log = logging.getLogger(__name__)
_tracer = tracer(__name__)


class Dispatcher:
    def __init__(
        self, settings: Settings, pool: asyncpg.Pool, js: JetStreamContext, hot_index: HotIndex | None = None
    ):
        self.settings = settings
        self.pool = pool
        self.js = js
        self.hot_index = hot_index
        self.floor = ClaimFloor()
        self.wake = asyncio.Event()
        # Phase timings of the loop, read by the bench: claim SQL, publish, mark.
        self.phase_seconds = {"claim": 0.0, "publish": 0.0, "mark": 0.0}

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            self.floor.lower(datetime.fromisoformat(payload))
        except ValueError:
            pass
        self.wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        listener: asyncpg.Connection | None = None
        while not stop.is_set():
            try:
                if listener is None or listener.is_closed():
                    listener = await self.pool.acquire()
                    await listener.add_listener(DUE_CHANNEL, self._on_notify)
                claimed = await self.dispatch_once()
                if claimed >= self.settings.batch_size:
                    continue  # more is due: no sleep
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncio.TimeoutError) as exc:
                log.warning("dispatch: %s; retrying", exc)
                if listener is not None:
                    await self._drop_listener(listener)
                    listener = None
                await sleep_or_stop(stop, 1.0)
                continue
            interval = self.settings.poll_interval_seconds * random.uniform(0.8, 1.2)
            self.wake.clear()
            await _first_of(stop, self.wake, timeout=interval)
        if listener is not None:
            await self._drop_listener(listener)

    async def _drop_listener(self, listener: asyncpg.Connection) -> None:
        try:
            await listener.remove_listener(DUE_CHANNEL, self._on_notify)
        except Exception:  # noqa: S110 - the connection may already be gone
            pass
        await self.pool.release(listener)

    async def claim(self, conn: asyncpg.Connection) -> list[asyncpg.Record]:
        s = self.settings
        if self.hot_index is not None:
            claimed = await self._claim_hinted(conn)
            if claimed is not None:
                return claimed
        started = time.perf_counter()
        rows = await dispatch_repo.claim_due_runs(
            conn,
            floor=await self.floor.get(conn),
            per_tenant_cap=s.per_tenant_cap,
            batch_size=s.batch_size,
            owner=s.owner,
            lease_seconds=s.claim_lease_seconds,
        )
        metrics.claim_duration_seconds.labels("scan").observe(time.perf_counter() - started)
        return rows

    async def _claim_hinted(self, conn: asyncpg.Connection) -> list[asyncpg.Record] | None:
        """The hot path; None sends the caller to the scan (index empty, wiped or unreachable)."""
        assert self.hot_index is not None
        s = self.settings
        started = time.perf_counter()
        ids = await self.hot_index.pop_due(time.time(), s.batch_size)
        if not ids:
            metrics.hot_index_events_total.labels("empty" if ids is not None else "fallback").inc()
            return None
        rows = await dispatch_repo.claim_hinted_runs(
            conn, ids, per_tenant_cap=s.per_tenant_cap, owner=s.owner, lease_seconds=s.claim_lease_seconds
        )
        metrics.claim_duration_seconds.labels("hot").observe(time.perf_counter() - started)
        metrics.hot_index_events_total.labels("hit").inc(len(rows))
        if len(rows) < len(ids):
            taken = {r["id"] for r in rows}
            leftovers = [i for i in ids if i not in taken]
            still_pending = await dispatch_repo.pending_among(conn, leftovers)
            metrics.hot_index_events_total.labels("stale").inc(len(leftovers) - len(still_pending))
            await self.hot_index.add(still_pending)
        return rows

    async def dispatch_once(self) -> int:
        """One turn of the loop; returns how many runs were claimed."""
        t0 = time.perf_counter()
        async with self.pool.acquire() as conn:
            claimed = await self.claim(conn)
            t1 = time.perf_counter()
            self.phase_seconds["claim"] += t1 - t0
            if not claimed:
                return 0
            metrics.claim_batch_size.observe(len(claimed))
            metrics.runs_claimed_total.inc(len(claimed))
            for row in claimed:
                metrics.due_lag_seconds.observe(max(0.0, float(row["lag"])))
            acked = await self.publish(claimed)
            t2 = time.perf_counter()
            self.phase_seconds["publish"] += t2 - t1
            metrics.publish_duration_seconds.observe(t2 - t1)
            await self.settle(conn, claimed, acked)
            self.phase_seconds["mark"] += time.perf_counter() - t2
        return len(claimed)

    async def publish(self, claimed: Sequence[asyncpg.Record]) -> list[bool]:
        s = self.settings
        outgoing = []
        for row in claimed:
            message = RunMessage.from_claimed(row)
            # One producer span per run, linked to the request that submitted it; its context
            # travels in the message headers so the worker's execution span is its child.
            with _tracer.start_as_current_span(
                "dispatch_run", kind=SpanKind.PRODUCER, links=link_to(row["traceparent"])
            ) as span:
                span.set_attribute("scheduler.run_id", str(message.run_id))
                span.set_attribute("scheduler.epoch", message.epoch)
                headers = inject({"Nats-Msg-Id": message.msg_id})
            outgoing.append(Outgoing(s.subject_for(message.tenant_id), message.encode(), headers))
        return await publish_pipelined(self.js, outgoing, s.publish_timeout_seconds)

    async def settle(self, conn: asyncpg.Connection, claimed: Sequence[asyncpg.Record], acked: list[bool]) -> None:
        """Acked runs get the dispatch lease; the rest go back to pending now, not after a lease."""
        ok = [(r["id"], r["scheduled_at"], r["epoch"]) for r, a in zip(claimed, acked, strict=True) if a]
        failed = [(r["id"], r["scheduled_at"], r["epoch"]) for r, a in zip(claimed, acked, strict=True) if not a]
        if ok:
            await dispatch_repo.mark_runs_published(conn, Fence(ok), self.settings.dispatch_lease_seconds)
            metrics.runs_published_total.inc(len(ok))
        if failed:
            released = await dispatch_repo.release_unpublished_runs(conn, Fence(failed))
            metrics.publish_failures_total.inc(len(failed))
            log.warning("publish failed for %d runs; released %d to pending", len(failed), len(released))
            if self.hot_index is not None:
                await self.hot_index.add(released)


async def _first_of(stop: asyncio.Event, wake: asyncio.Event, timeout: float) -> None:
    waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wake.wait())]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()

