"""The lease reaper: rescues runs whose lease lapsed. SKIP LOCKED makes any number of replicas safe.

A running run past its lease lost its worker: the attempt is consumed, then it is retried with
backoff or failed. Until its first heartbeat, a run's queue row is still the one its claim wrote
(dispatched, under the dispatch lease; its start leaves it): the reaper reads those rows early by the
difference of the two leases, so a lost run is found as soon as its own lease lapses.

A dispatched run past its lease never started. Either its message never reached the stream (its
engine died between claim and publish) and it must go back to pending, no attempt consumed; or its
message is still waiting behind slow workers, and re-sending it only doubles the work: every copy
but one is dropped at start by the epoch fence (with a 2 s webhook and too few workers, 4,000 runs
made 6,476 claims). So the reaper asks JetStream what it still holds before it rescues: messages are
delivered in stream order, so a run claimed before the publish time of the oldest message no worker
has received yet can no longer be waiting. Why this and not a longer lease or one extended after
the PubAck: it needs no write per batch (a "mark published" UPDATE was a fifth of the loop), no
guess of the workers' speed, and it holds for any number of engines and workers — they share one
stream and one durable consumer. The watermark is the one read on the previous pass, which gives a
message delivered just now the time to be started before its run is judged. If JetStream cannot be
asked, no dispatched run is rescued on that pass: re-sending could not be published either.

It also refreshes the gauges read from the database (the due backlog the engines' autoscaler reads,
the runs held back by flow control)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import asyncpg
from nats.aio.client import Client as NATS

from app import pending
from app.background import Periodic
from app.config import Settings
from app.db import flow as flow_repo
from app.db import transitions
from app.db.connection import planned_generically
from app.domain import RunStatus
from app.engine.backlog import oldest_waiting_since
from app.telemetry import metrics

log = logging.getLogger(__name__)
BATCH = 1000
# The due backlog is counted up to this many runs: past it, the workers' autoscaler is at 78 replicas
# of 256 slots anyway, and the count stays ~9 ms on a 100k backlog (39 ms uncapped; measured).
DUE_BACKLOG_LIMIT = 20_000
# Postgres (claim time) and NATS (publish time) keep their own clocks; allow them to differ this much.
CLOCK_SKEW_SECONDS = 2.0
NOTHING = datetime.min.replace(tzinfo=UTC)  # "reap no dispatched run": JetStream could not be asked


class Reaper(Periodic):
    name = "reaper"

    def __init__(self, settings: Settings, pool: asyncpg.Pool, nc: NATS | None = None):
        self.settings = settings
        self.pool = pool
        self.interval = settings.reap_interval_seconds
        self.nc = nc  # None: no JetStream to ask (tests of the lease alone), every lapsed lease is reaped
        self._watermark: datetime | None = NOTHING  # the previous pass's; nothing is judged on the first

    async def step(self) -> int:
        claimed_before = await self._claimed_before()
        rescued = 0
        async with self.pool.acquire() as conn:
            while claimed_before != NOTHING:
                async with planned_generically(conn):
                    rows = await transitions.reap_dispatched_runs(conn, BATCH, claimed_before)
                metrics.runs_reaped_total.labels(RunStatus.DISPATCHED, RunStatus.PENDING).inc(len(rows))
                rescued += len(rows)
                await pending.runs_pending(rows)
                if len(rows) < BATCH:
                    break
            while True:
                async with planned_generically(conn):
                    rows = await transitions.reap_running_runs(conn, BATCH, self._lead())
                for row in rows:
                    metrics.runs_reaped_total.labels(RunStatus.RUNNING, row["status"]).inc()
                rescued += len(rows)
                await pending.runs_pending([r for r in rows if r["status"] == RunStatus.PENDING])
                if len(rows) < BATCH:
                    break
            oldest_age, due_runs = await transitions.due_backlog(conn, DUE_BACKLOG_LIMIT)
            held = await flow_repo.count_held_runs(conn, DUE_BACKLOG_LIMIT)
        metrics.oldest_due_pending_age_seconds.set(oldest_age)
        metrics.due_pending_runs.set(due_runs)
        for reason, runs in held.items():
            metrics.held_runs.labels(reason).set(runs)
        if rescued:
            log.info("reaper rescued %d runs", rescued)
        return rescued

    async def _claimed_before(self) -> datetime | None:
        """Dispatched runs claimed before this may be rescued (None: any of them; NOTHING: none)."""
        if self.nc is None:
            return None
        try:
            since = await oldest_waiting_since(self.nc.jetstream(), self.settings)
            now = None if since is None else since - timedelta(seconds=self._margin())
        except Exception as exc:  # NATS away: a re-sent run could not be published anyway
            log.debug("reaper: cannot ask JetStream what it holds: %s", exc)
            now = NOTHING
        previous, self._watermark = self._watermark, now
        return _earliest(previous, now)

    def _lead(self) -> float:
        # A run's start leaves its dispatched queue row (scheduler_queue_changed): its own lease lapses
        # at the earliest this long before that row's.
        return max(0.0, self.settings.dispatch_lease_seconds - self.settings.lease_seconds)

    def _margin(self) -> float:
        # A message is published at most its PubAck wait and the re-sending after it later than its
        # claim (app/engine/dispatcher.py: publish_again; later, its run was released).
        s = self.settings
        retrying = min(s.publish_retry_seconds, s.dispatch_lease_seconds / 2)
        return s.publish_timeout_seconds + retrying + CLOCK_SKEW_SECONDS


def _earliest(a: datetime | None, b: datetime | None) -> datetime | None:
    """The stricter of two bounds; None is no bound (and NOTHING, the earliest time, wins)."""
    if a is None or b is None:
        return b if a is None else a
    return min(a, b)
