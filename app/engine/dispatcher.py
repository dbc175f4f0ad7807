"""The dispatcher: the engine's claim loops. The main loop claims a batch and sends it to JetStream
(batches.py), and while its PubAcks come back claims the next one; a settler releases to pending
whatever JetStream did not ack. A second loop claims the urgent runs alone and sends them to their
own lane.

Overlapping the batches keeps the database and NATS busy at once: in a strict claim -> publish ->
settle loop the process waits on one or the other half of the time (docs/bench.md). A run due now
is dispatched within a second: submissions NOTIFY idle engines (wakeups.py), and the loops poll with
a short jittered sleep otherwise (the jitter keeps replicas from synchronizing their claims).

Both loops are periodic services (app/background.py) with its error policy: a batch that fails is
abandoned (its runs come back when their dispatch lease lapses), the loop goes on.
"""

from __future__ import annotations

import asyncio
import functools
import logging

import asyncpg
from nats.aio.client import Client as NATS

from app.background import AGAIN, Periodic, Wait, survived
from app.config import Settings
from app.db.errors import DB_ERRORS
from app.domain import LEAST_URGENT
from app.engine.backlog import Backpressure
from app.engine.batches import Batches
from app.engine.claims import EVERY_PRIORITY, Claims, Hints, Priorities
from app.engine.floor import ClaimBounds
from app.engine.wakeups import DueListener

log = logging.getLogger(__name__)
# While paused, the queue is asked this often: the workers may empty the room in well under a poll.
PAUSED_RECHECK_SECONDS = 0.25
ERROR_WAIT_SECONDS = 1.0  # after a failed batch, the main loop waits this long (a database away)


class Dispatcher:
    name = "dispatcher"

    def __init__(self, settings: Settings, pool: asyncpg.Pool, nc: NATS, hints: Hints | None = None):
        self.settings = settings
        bounds = ClaimBounds()
        self.claims = Claims(settings, bounds, hints)
        self.batches = Batches(settings, pool, nc, self.claims)
        self.backpressure = Backpressure(nc, settings)
        self.listener = DueListener(pool, bounds)
        # With the urgent lane on, urgent runs are the urgent loop's and the main loop claims the
        # rest: claimed in the main loop's batches of BATCH_SIZE, an urgent run would wait for the
        # whole batch to be claimed and sent. A lane this engine does not serve (LANES) has no
        # claims: None.
        self.main_priorities: Priorities | None = EVERY_PRIORITY
        self.urgent_priorities: Priorities | None = None
        urgent = settings.urgent_priority
        if urgent >= 0:
            self.main_priorities = (urgent + 1, LEAST_URGENT) if settings.serves("normal") else None
            self.urgent_priorities = (0, urgent) if settings.serves("urgent") else None

    async def run(self, stop: asyncio.Event) -> None:
        self.batches.stopping = stop
        main = MainClaims(self, stop)
        loops = [main.run(stop)]
        if self.urgent_priorities is not None:
            loops.append(UrgentClaims(self, self.urgent_priorities).run(stop))
        try:
            await asyncio.gather(*loops)
        finally:
            # Graceful stop: no new claims; the batches in flight settle (acked runs stay dispatched,
            # the rest go back to pending), so no lease is left to lapse.
            await main.settled()
            await self.listener.close()
            await self.batches.publisher.stop()


class MainClaims(Periodic):
    """Claims while the workers keep up, up to DISPATCH_BATCHES_IN_FLIGHT batches being sent at once.
    It also keeps the one connection that LISTENs for due runs, and reads the workers' queue (at
    most once a second while there is room), which renews the urgent lane's room: an engine serving
    only urgent runs keeps this loop for those and claims nothing here."""

    name = "dispatch"
    after_error = ERROR_WAIT_SECONDS

    def __init__(self, dispatcher: Dispatcher, stop: asyncio.Event):
        self.d = dispatcher
        self.stop = stop
        self.interval = dispatcher.settings.poll_interval_seconds
        self.wake = dispatcher.listener.wake
        self.slots = asyncio.Semaphore(dispatcher.settings.dispatch_batches_in_flight)
        self.settling: set[asyncio.Task[None]] = set()

    async def step(self) -> Wait | None:
        d = self.d
        if not await d.listener.listening(self.stop):
            return AGAIN  # it waited after a failure; `stop` is looked at first
        if await d.backpressure.workers_behind() or d.main_priorities is None:
            return Wait(PAUSED_RECHECK_SECONDS)  # nothing to claim here now
        await self.slots.acquire()
        try:
            built, sent = await d.batches.claim_and_send(d.main_priorities)
        except BaseException as exc:
            self.slots.release()
            if isinstance(exc, DB_ERRORS):
                await d.listener.close()  # listened again on the next step
            raise
        if not built.rows:
            self.slots.release()
            return None
        messages, urgent = len(built.messages), built.urgent
        d.backpressure.publishing(messages, urgent, len(built.rows))
        task = asyncio.create_task(d.batches.settle(built, sent))
        self.settling.add(task)
        task.add_done_callback(self.settling.discard)
        task.add_done_callback(functools.partial(self._settled, messages, urgent))
        # More may be due, so no wait: a short batch is no proof that the due set is empty. The
        # per-tenant cap cuts a batch that one tenant crowds to `cap` runs, so waiting after a short
        # batch would hold a lone busy tenant to `cap` runs per poll interval. Only an empty claim
        # waits.
        return AGAIN

    def _settled(self, messages: int, urgent: int, task: asyncio.Task[None]) -> None:
        self.d.backpressure.settled(messages, urgent)
        self.slots.release()
        if not task.cancelled() and (exc := task.exception()) is not None:
            survived("settle", exc)

    async def settled(self) -> None:
        if self.settling:
            await asyncio.gather(*self.settling, return_exceptions=True)


class UrgentClaims(Periodic):
    """Claims the urgent runs, beside the main loop, whenever their lane has room: an urgent run due
    now is claimed at once instead of after the batch the main loop is claiming or sending
    (docs/bench.md 23). A batch is sent and settled before the next claim: urgent runs come a few at
    a time. It needs no listener of its own: every notification wakes both loops."""

    name = "dispatch urgent"

    def __init__(self, dispatcher: Dispatcher, priorities: Priorities):
        self.d = dispatcher
        self.priorities = priorities
        self.interval = dispatcher.settings.poll_interval_seconds
        self.wake = dispatcher.listener.another_wake()

    async def step(self) -> Wait | None:
        d = self.d
        if d.backpressure.urgent_room <= 0:
            return None
        built, sent = await d.batches.claim_and_send(self.priorities)
        if not (built.rows or built.unbuildable):
            return None
        messages = len(built.messages)
        d.backpressure.publishing(messages, messages, len(built.rows))
        try:
            await d.batches.settle(built, sent)
        finally:
            d.backpressure.settled(messages, messages)
        return AGAIN
