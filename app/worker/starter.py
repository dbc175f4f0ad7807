"""Starting runs: per start batch, one statement starts every delivery whose epoch still matches
and that is free to start (start_runs, fenced); a second, only when some were not, settles the rest
(settle_unstarted_runs): a run past its deadline to start ends expired, a paused one goes back to
pending held, and duplicates, stale epochs and cancelled runs are acked and dropped. A noop, having
nothing to execute, is recorded succeeded by the statement that starts it. The others are handed to
the executor (executor.py), each in a slot of its tenant's (fairness.py), and their outcomes to the
group commit (completer.py).

An attempt whose run is cancelled while it starts or executes is stopped, and nothing of it recorded
(cancels.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import asyncpg

from app.config import Settings
from app.db import transitions
from app.db.errors import DB_ERRORS, is_transient
from app.db.transitions import Fence
from app.domain import RunStatus
from app.telemetry import metrics
from app.telemetry.tracing import recording
from app.worker.cancels import Cancellations
from app.worker.completer import Completer
from app.worker.delivery import Delivery, quietly
from app.worker.executor import Executor
from app.worker.fairness import TenantSlots

log = logging.getLogger(__name__)
# A write that starts a batch: transitions.start_runs, or settle_unstarted_runs for what it left.
StartWrite = Callable[..., Awaitable[transitions.Starts]]


class Starter:
    def __init__(
        self,
        settings: Settings,
        pool: asyncpg.Pool,
        slots: TenantSlots,
        executor: Executor,
        completer: Completer,
    ):
        self.settings = settings
        self.pool = pool
        self.slots = slots
        self.executor = executor
        self.completer = completer
        self.starting: set[Delivery] = set()  # in a start statement now
        self.executing: dict[asyncio.Task[None], Delivery] = {}
        self.cancels = Cancellations(pool, self.executing, self.starting)
        # Set when the worker stops: a start that fails then hands its runs back instead of retrying.
        self.stopping = asyncio.Event()
        self.slot_freed = asyncio.Event()
        self._succeeded_inline = metrics.run_outcomes_total.labels(RunStatus.SUCCEEDED)

    async def start(self, batch: list[Delivery]) -> None:
        self.starting.update(batch)
        try:
            await self._start_batch(batch)
        finally:
            self.starting.difference_update(batch)
            self.cancels.forget(batch)

    async def _start_batch(self, batch: list[Delivery]) -> None:
        started = await self._write(transitions.start_runs, batch)
        if started is None:
            return
        # Rarely any (a paused job, a deadline passed, a duplicate delivery): settled in a write of
        # their own, so a failure there leaves the starts above as they are.
        if rest := [d for d in batch if d.run.run_id not in started]:
            settled = await self._write(transitions.settle_unstarted_runs, rest)
            if settled is None:
                batch = [d for d in batch if d.run.run_id in started]
            else:
                started.add(settled)
        for d in batch:
            attempt = started.get(d.run.run_id)
            if attempt is None:
                if d.run.run_id in started.expired:
                    # Past its deadline to start: it ended expired instead, and never runs.
                    metrics.runs_expired_total.labels("start").inc()
                elif d.run.run_id in started:
                    # Refused: its job or tenant is paused; it waits held, pending, for the resume.
                    metrics.starts_refused_total.inc()
                else:
                    # A duplicate delivery, a stale epoch (the run was rescued) or a cancelled run.
                    metrics.stale_results_total.labels("start").inc()
                self.free_slot(d)
                await quietly(d.msg.ack())
                continue
            d.attempt = attempt
            if d.inline:
                # Started and succeeded in the one statement above: durable, so acked now. A span
                # only if one is recorded (nothing else would see its context).
                d.succeed()
                if recording():
                    self.executor.finish_span(d, self.executor.start_span(d), time.perf_counter())
                else:
                    self.executor.observe_duration(d, 0.0)
                self._succeeded_inline.inc()
                await quietly(d.msg.ack())
                continue
            if self.cancels.stopped_at_start(d):
                self.free_slot(d)
                await quietly(d.msg.ack())
                continue
            task = asyncio.create_task(self.executor.execute(d))
            self.executing[task] = d
            task.add_done_callback(self._executed)

    @staticmethod
    def _fence(batch: list[Delivery]) -> Fence:
        return Fence([d.fence() for d in batch])

    async def _write(self, write: StartWrite, batch: list[Delivery]) -> transitions.Starts | None:
        """`write` of the batch, retried while the database fails transiently; None when it gave up
        and handed the batch back (nak: redelivered later, or rescued when the lease lapses). A run it
        starts is leased from no later than the moment the statement was sent."""
        while True:
            try:
                async with self.pool.acquire() as conn:
                    sent = time.monotonic()
                    starts = await write(
                        conn,
                        self._fence(batch),
                        [d.inline for d in batch],
                        owner=self.settings.owner,
                        lease_seconds=self.settings.lease_seconds,
                    )
                for d in batch:
                    d.lease_until = sent + self.settings.lease_seconds
                return starts
            except DB_ERRORS as exc:
                if self.stopping.is_set() or not is_transient(exc):
                    log.warning("start: %s; handing %d runs back", exc, len(batch))
                    for d in batch:
                        self.free_slot(d)
                        await quietly(d.msg.nak())
                    return None
                log.warning("start: %s; retrying", exc)
                await asyncio.sleep(1.0)

    def free_slot(self, d: Delivery) -> None:
        if not d.inline:
            self.slots.give_back(d.tenant)
            self.slot_freed.set()

    def _executed(self, task: asyncio.Task[None]) -> None:
        delivery = self.executing.pop(task)
        self.free_slot(delivery)
        if delivery.stopped:
            self.cancels.acknowledge(delivery)
        elif not task.cancelled():  # cancelled otherwise: at shutdown, which hands it back
            self.completer.add(delivery)
