"""Completing runs: heartbeats while they run (and while they are held back), then their outcomes
in a group commit (one statement records many, then their messages are acked,
so a run's message is acked only after its outcome is durable). Three services (app/background.py):
the completer, the heartbeat (leases in Postgres) and the in-progress acks (messages in JetStream).

A batch that fails for a reason retrying cannot fix is split in halves until the rows at fault are
alone; the others commit. Retrying the whole batch every second, one run whose error Postgres
refused (a NUL) once held every other tenant's outcomes behind it indefinitely."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable

import asyncpg

from app import pending
from app.aio import first_of
from app.background import Periodic
from app.config import Settings
from app.db import transitions
from app.db.errors import DB_ERRORS, is_transient
from app.db.transitions import Fence
from app.domain import RunStatus
from app.telemetry import metrics
from app.worker.delivery import Delivery, quietly

log = logging.getLogger(__name__)
FLUSH_MAX = 500
FLUSH_DELAY = 0.002  # seconds an outcome may wait for company in the group commit
FINAL_FLUSH_SECONDS = 2.0  # at shutdown, outcomes get at least this long to be recorded
# In-progress acks sent per ack_wait: a live worker's message is redelivered only once three in a
# row are late or lost (its event loop stalled for three quarters of ack_wait).
IN_PROGRESS_PER_ACK_WAIT = 4


class Completer(Periodic):
    """Records outcomes as they come (`add` wakes it), at least once a second what a failed step
    left. At stop the write in flight is cut (it is fenced: written again, it changes nothing) and
    what is left gets until `finish_by`, and at least FINAL_FLUSH_SECONDS, to be recorded."""

    name = "completer"
    interval = 1.0
    jitter = 0.0
    wake: asyncio.Event

    def __init__(self, settings: Settings, pool: asyncpg.Pool):
        self.settings = settings
        self.pool = pool
        self.unrecorded: list[Delivery] = []  # outcomes not yet durable, oldest first
        self.wake = asyncio.Event()
        self.finish_by = 0.0  # monotonic; set by the worker's intake as it stops

    def add(self, d: Delivery) -> None:
        self.unrecorded.append(d)
        self.wake.set()

    async def step(self) -> None:
        if self.unrecorded:
            await asyncio.sleep(FLUSH_DELAY)
            await self.flush()

    async def run(self, stop: asyncio.Event) -> None:
        committing = asyncio.create_task(super().run(stop))
        try:
            await first_of((stop,), None, tasks=(committing,))
        finally:
            committing.cancel()
            await asyncio.gather(committing, return_exceptions=True)
        if not stop.is_set():
            committing.result()  # it ended on its own: what it raised (a part that died)
        await self.flush(deadline=max(self.finish_by, time.monotonic() + FINAL_FLUSH_SECONDS))

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
            await quietly(d.msg.term())

    async def _record(self, batch: list[Delivery]) -> None:
        async with self.pool.acquire() as conn:
            rows = await transitions.finish_runs(conn, Fence([d.fence() for d in batch]), batch)
        for status, runs in Counter(row["status"] for row in rows).items():
            metrics.run_outcomes_total.labels(status).inc(runs)
        stale = len(batch) - len(rows)  # a row a run recorded
        if stale:
            # The run was rescued while this worker ran it: the late result is discarded.
            metrics.stale_results_total.labels("finish").inc(stale)
        for d in batch:
            await quietly(d.msg.ack())
        await pending.runs_pending([r for r in rows if r["status"] == RunStatus.PENDING])

    async def renew(self, held: list[Delivery]) -> None:
        if not held:
            return
        try:
            async with self.pool.acquire() as conn:
                await transitions.renew_dispatch_leases(
                    conn, Fence([d.fence() for d in held]), self.settings.dispatch_lease_seconds
                )
        except DB_ERRORS as exc:
            log.warning("renewing %d dispatch leases: %s", len(held), exc)


class Heartbeat(Periodic):
    """Keeps both leases: running runs' (heartbeat_runs) and held-back runs' dispatch lease.
    Outcomes not yet recorded are still `running` in Postgres: they beat too, or a slow write would
    get them reaped and executed again. The runs the beat no longer found running go to `missed`
    (the cancels' fallback: app/worker/cancels.py)."""

    name = "heartbeat"
    jitter = 0.0

    def __init__(
        self,
        completer: Completer,
        executing: Callable[[], list[Delivery]],
        held: Callable[[], list[Delivery]],
        missed: Callable[[list[Delivery]], Awaitable[None]],
    ):
        self.completer = completer
        self.executing, self.held, self.missed = executing, held, missed
        s = completer.settings
        self.interval = min(s.lease_seconds, s.dispatch_lease_seconds) / 3

    async def step(self) -> None:
        s, pool = self.completer.settings, self.completer.pool
        alive, waiting = self.executing() + list(self.completer.unrecorded), self.held()
        metrics.runs_held_back.set(len(waiting))
        await self.completer.renew(waiting)
        if not alive:
            return
        async with pool.acquire() as conn:
            sent = time.monotonic()
            kept = await transitions.heartbeat_runs(conn, Fence([d.fence() for d in alive]), s.lease_seconds)
        gone = []
        for d in alive:
            if d.run.run_id in kept:
                d.lease_until = sent + s.lease_seconds
            else:
                gone.append(d)
        if gone:
            await self.missed(gone)


class InProgress(Periodic):
    """Keeps JetStream from redelivering the messages this worker holds and has not answered: their
    runs held back, starting, executing, or with outcomes not yet recorded. An in-progress ack
    restarts a message's ack timer, so ACK_WAIT_SECONDS can be short: what a killed worker held goes
    to another worker at most that long after the kill. A service of its own, not the heartbeat's:
    at this pace that one's writes would multiply; this one only publishes."""

    name = "in progress"
    jitter = 0.0

    def __init__(self, completer: Completer, holding: Callable[[], list[Delivery]]):
        self.completer = completer
        self.holding = holding
        self.interval = completer.settings.ack_wait_seconds / IN_PROGRESS_PER_ACK_WAIT

    async def step(self) -> None:
        # One in_progress a message, however many of its runs are held.
        for part in {d.msg.message: d.msg for d in self.holding() + self.completer.unrecorded}.values():
            await quietly(part.in_progress())
