"""Stopping the attempts whose run was cancelled while this worker executes them.

The cancel itself is Postgres's: its statement ended the run and closed the attempt as `cancelled`
(cancel_run in app/db/runs.sql). What is left here is to stop executing it: the task is
cancelled, so a webhook's request is aborted (its connection closed) and a python handler sees
asyncio.CancelledError where it awaits (and may clean up). The worker learns of a cancel two ways:
- the cancel's notice over core NATS (app/bus/cancels.py), as soon as it is committed;
- failing that (NATS away, an API process not connected to it), its next heartbeat: heartbeat_runs
  no longer finds the run running, and of the runs it missed, those Postgres says were cancelled in
  their epoch are stopped (a read made only when a beat missed some), so within a heartbeat
  interval (a third of the shorter of the two leases).
Nothing of a stopped attempt is recorded (its outcome would match no running row anyway), whatever
the handler did with the cancellation, and its message is acked: the run is over.

A notice can reach the worker while the run's start statement is still on its way back (the start
committed first, the cancel right after it): such runs are remembered until their start batch is
done with, and are not executed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

import asyncpg
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from app.bus.cancels import Attempt, cancel_subject, decode
from app.config import Settings
from app.db import transitions
from app.db.errors import DB_ERRORS
from app.db.transitions import Fence
from app.telemetry import metrics
from app.worker.delivery import Delivery, quietly

log = logging.getLogger(__name__)


def _attempt(d: Delivery) -> Attempt:
    return (d.run.run_id, d.run.epoch)


class Cancellations:
    """What a worker executes (`executing`: task -> delivery) and starts (`starting`), both the
    consumer's own, seen from the cancels' side."""

    def __init__(
        self, pool: asyncpg.Pool, executing: dict[asyncio.Task[None], Delivery], starting: set[Delivery]
    ):
        self.pool = pool
        self.executing = executing
        self.starting = starting
        self._named_at_start: set[Attempt] = set()
        self._acks: set[asyncio.Task[None]] = set()

    async def listen(self, nc: NATS, settings: Settings) -> Subscription:
        """Subscribes to the cancels' notices (every worker gets each one)."""

        async def on_notice(msg: Msg) -> None:
            self.stop(decode(msg.data), via="notice")

        return await nc.subscribe(cancel_subject(settings), cb=on_notice)

    def stop(self, attempts: set[Attempt], *, via: str) -> None:
        """Stops the attempts named that this worker executes; remembers those it is starting."""
        if not attempts:
            return
        for task, d in self.executing.items():
            if not d.stopped and _attempt(d) in attempts:
                d.stopped = True
                task.cancel()
                metrics.attempts_stopped_total.labels(via).inc()
        self._named_at_start.update(a for a in map(_attempt, self.starting) if a in attempts)

    def stopped_at_start(self, d: Delivery) -> bool:
        """Whether a notice named this run while its start was in flight: then it is not executed."""
        if _attempt(d) not in self._named_at_start:
            return False
        d.stopped = True
        metrics.attempts_stopped_total.labels("notice").inc()
        return True

    def forget(self, batch: Iterable[Delivery]) -> None:
        """A start batch is done with: what was named at its start is stopped or was never started."""
        self._named_at_start.difference_update(map(_attempt, batch))

    def acknowledge(self, d: Delivery) -> None:
        """A stopped attempt's message is acked; nothing of it is recorded."""
        ack = asyncio.create_task(quietly(d.msg.ack()))
        self._acks.add(ack)  # held until done: the loop keeps only a weak reference to a task
        ack.add_done_callback(self._acks.discard)

    async def check(self, missed: list[Delivery]) -> None:
        """The fallback: of the runs a heartbeat no longer found running, those still executing here
        that were cancelled are stopped."""
        executing = set(self.executing.values())
        candidates = [d for d in missed if d in executing and not d.stopped]
        if not candidates:
            return
        try:
            async with self.pool.acquire() as conn:
                cancelled = await transitions.cancelled_among(conn, Fence([d.fence() for d in candidates]))
        except DB_ERRORS as exc:
            log.warning("reading %d runs a heartbeat missed: %s", len(candidates), exc)
            return
        self.stop({_attempt(d) for d in candidates if d.run.run_id in cancelled}, via="heartbeat")
