"""The worker loop: fetch, hold back what a tenant may not run yet, start, and hand over.

A message carries several runs of one tenant (app/bus/message.py); from here on each run is a
Delivery of its own, and the message is answered once all of its runs are (delivery.py: Part).

Per start batch, one statement starts every delivery whose epoch still matches (the rest are
duplicates, stale or cancelled: acked and dropped; a run past its deadline to start ends expired
there instead); a noop, having nothing to execute, is recorded succeeded by that same statement.
Targets run concurrently (executor.py) in slots shared fairly between tenants (fairness.py);
outcomes go to a group commit (completer.py). Until a message is answered, in-progress acks keep
JetStream from redelivering it (every quarter of ACK_WAIT_SECONDS, which is short so that a killed
worker's messages reach another worker within seconds), and heartbeats keep the runs' leases in
Postgres (completer.py). An attempt whose run is cancelled while
it executes is stopped, and nothing of it recorded (cancels.py).

Holding back: a run whose tenant may not take a slot now waits here, still `dispatched`, its dispatch
lease renewed, up to a fetch batch in all (held.py). Beyond that the heaviest tenant's newest
messages held whole are nak'ed with a delay, their runs' lease renewed again, so the worker can look
past one tenant's backlog for others' runs. A nak counts as a delivery, which is why the consumer's
max_deliver stays unlimited (jetstream.py). While the worker is full the stream is only peeked at
(about once a second), so a lone busy tenant is not churned through naks.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any

import asyncpg
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from app.aio import first_of, supervise
from app.bus.hot_index import HotIndex
from app.bus.jetstream import ensure_consumer, lanes
from app.bus.pull import PullConsumer
from app.config import Settings
from app.db import transitions
from app.db.errors import DB_ERRORS, is_transient
from app.db.transitions import Fence
from app.domain import RunStatus
from app.telemetry import metrics
from app.telemetry.tracing import recording
from app.worker.callbacks import CallbackDeliverer
from app.worker.cancels import Cancellations
from app.worker.completer import Completer
from app.worker.delivery import Delivery, quietly, received
from app.worker.executor import Executor
from app.worker.fairness import TenantSlots
from app.worker.held import HeldRuns
from app.worker.targets import Handler, load_handlers

log = logging.getLogger(__name__)
START_BATCHES_IN_FLIGHT = 2
PEEK_INTERVAL = 1.0  # seconds between fetches while every slot is taken (at most)
FINAL_FLUSH_SECONDS = 2.0  # at shutdown, outcomes get at least this long to be recorded
FETCH_RETRY_SECONDS = 0.5  # a fetch that failed is tried again after this (or at once at shutdown)


class Worker:
    def __init__(
        self,
        settings: Settings,
        pool: asyncpg.Pool,
        nc: NATS,
        hot_index: HotIndex | None = None,
        handlers: dict[str, Handler] | None = None,
    ):
        self.settings = settings
        self.pool = pool
        self.nc = nc
        self.js = nc.jetstream()
        self.slots = TenantSlots(settings.worker_concurrency, settings.worker_tenant_share)
        self.executor = Executor(
            settings, pool, load_handlers() if handlers is None else handlers, self.slots.ceiling
        )
        self.completer = Completer(settings, pool, hot_index)
        self.callbacks = CallbackDeliverer(settings, pool, self.executor.signing_keys)
        self.held = HeldRuns()
        self.starting: set[Delivery] = set()  # in a start statement now
        self.executing: dict[asyncio.Task[None], Delivery] = {}
        self.cancels = Cancellations(pool, self.executing, self.starting)
        self.stopping = asyncio.Event()
        self._slot_freed = asyncio.Event()
        self._succeeded_inline = metrics.run_outcomes_total.labels(RunStatus.SUCCEEDED)
        # A run handed back returns at half its renewed dispatch lease, and is renewed again when it
        # does. Meanwhile the worker peeks at least eight times: each peek looks a fetch batch further
        # past the busy tenant's backlog (redeliveries come first), so others' runs behind up to eight
        # batches of it are found before their own dispatch lease lapses.
        self.nak_delay = settings.dispatch_lease_seconds / 2
        self.peek_interval = min(PEEK_INTERVAL, self.nak_delay / 8)

    # ── the loop ──

    async def run(self, stop: asyncio.Event) -> None:
        s = self.settings
        await ensure_consumer(self.js, s)
        # One fetch loop per lane it serves (LANES), each with its own start batches in flight: an
        # urgent run is fetched and started beside the other lane's batches, not after them.
        subs = [PullConsumer(self.nc, lane) for lane in lanes(s) if s.serves(lane.name)]
        starts: list[set[asyncio.Task[None]]] = [set() for _ in subs]
        for sub in subs:
            await sub.start()
        notices = await self.cancels.listen(self.nc, s)
        # The fetch loops end on `halt`: at `stop`, or when another part died. Without its completer
        # the worker would take work it never records, without heartbeats every lease would lapse:
        # stop, and let the process be restarted.
        halt = asyncio.Event()
        fetchers = {
            asyncio.create_task(self._fetch(sub, lane_starts, halt), name=f"fetcher {sub.lane.name}")
            for sub, lane_starts in zip(subs, starts, strict=True)
        }
        completer = asyncio.create_task(self.completer.run(), name="completer")
        heartbeats = {
            asyncio.create_task(
                self.completer.heartbeat(
                    lambda: list(self.executing.values()), lambda: list(self.held), self.cancels.check
                ),
                name="heartbeat",
            ),
            asyncio.create_task(self.completer.keep_messages(self._holding), name="in progress"),
        }
        callbacks = asyncio.create_task(self.callbacks.run(), name="callbacks")
        try:
            died = await supervise({*fetchers, completer, *heartbeats, callbacks}, stop, "worker")
        finally:
            halt.set()
            await quietly(notices.unsubscribe())
            # The fetches in flight settle (what they brought is held, then handed back below).
            await asyncio.gather(*fetchers, return_exceptions=True)
            callbacks.cancel()  # deliveries in flight are left to their claims' lapse
            await asyncio.gather(callbacks, return_exceptions=True)
            await self.callbacks.close()
            await self._shut_down(subs, set().union(*starts), completer, heartbeats)
        if died is not None:
            raise died

    async def _fetch(self, sub: PullConsumer, starts: set[asyncio.Task[None]], halt: asyncio.Event) -> None:
        last_peek = 0.0
        fetch_size = metrics.worker_fetch_size.labels(sub.lane.name)
        while not halt.is_set():
            self._admit(starts)
            free = self._free()
            size = self._messages_for(free) if free > 0 else 0
            if free <= 0 and time.monotonic() - last_peek >= self.peek_interval:
                # Every slot taken: peek now and then for tenants under their share, a fetch batch
                # of messages further each time (the runs they bring beyond the held are handed back).
                size, last_peek = self.settings.worker_fetch_batch, time.monotonic()
            if size <= 0 or len(starts) >= START_BATCHES_IN_FLIGHT:
                await self._wait_for_change(starts, halt)
                continue
            try:
                msgs = await sub.fetch(size, timeout=1.0)
            except Exception as exc:  # NATS reconnecting, the consumer's leader being elected: wait it out
                log.warning("fetch (%s): %s: %s", sub.lane.name, type(exc).__name__, exc)
                await first_of((halt,), FETCH_RETRY_SECONDS)
                continue
            fetch_size.observe(len(msgs))
            if msgs:
                await self._receive(msgs, starts, urgent=sub.lane.urgent)

    def _free(self) -> int:
        """How many runs to fetch for the free slots (a fetch batch at most)."""
        free = self.settings.worker_concurrency - self.slots.total - len(self.held)
        return min(free, self.settings.worker_fetch_batch)

    def _messages_for(self, runs: int) -> int:
        """Messages to ask for about `runs` runs, as if each were full (MESSAGE_RUNS runs): smaller
        ones bring fewer and the loop asks again; at least one, so up to MESSAGE_RUNS - 1 runs more
        than `runs` wait held. Asking for one a run brought up to MESSAGE_RUNS times what the slots
        take, and handed the rest back to the stream."""
        return max(1, runs // self.settings.message_runs)

    async def _wait_for_change(self, starts: set[asyncio.Task[None]], stop: asyncio.Event) -> None:
        self._slot_freed.clear()
        await first_of((self._slot_freed, stop), min(0.25, self.peek_interval), tasks=starts)

    async def _shut_down(
        self,
        subs: list[PullConsumer],
        starts: set[asyncio.Task[None]],
        completer: asyncio.Task[None],
        heartbeats: set[asyncio.Task[None]],
    ) -> None:
        """Stop taking work; what runs gets the grace period to finish, its outcomes recorded. What
        does not finish, or cannot be recorded in time, is handed back exactly like a lost worker's
        (nak, then the lease reaper): nothing is lost, and the process exits within its grace period
        even when the database is away."""
        deadline = time.monotonic() + self.settings.worker_grace_seconds
        self.stopping.set()
        if starts:
            await asyncio.wait(list(starts), timeout=max(0.1, deadline - time.monotonic()))
            for start in starts:  # still blocked: their messages are redelivered, their runs reaped
                start.cancel()
        for sub in subs:
            await quietly(sub.stop())
            for msg in sub.drain_local():  # delivered to this worker, never started: hand them back
                await quietly(msg.nak())
        for d in self.held:
            await quietly(d.msg.nak())
        self.held.clear()
        if self.executing:
            await asyncio.wait(list(self.executing), timeout=max(0.0, deadline - time.monotonic()))
        for task, delivery in list(self.executing.items()):
            task.cancel()
            await quietly(delivery.msg.nak())
        completer.cancel()
        await asyncio.gather(completer, return_exceptions=True)
        await self.completer.flush(deadline=max(deadline, time.monotonic() + FINAL_FLUSH_SECONDS))
        for heartbeat in heartbeats:
            heartbeat.cancel()
        await asyncio.gather(*heartbeats, *starts, return_exceptions=True)
        await self.executor.close()

    # ── receiving: decode, de-duplicate, hold ──

    async def _receive(self, msgs: list[Msg], starts: set[asyncio.Task[None]], *, urgent: bool) -> None:
        fresh: dict[Any, Delivery] = {}  # by run id
        for delivery in [d for msg in msgs for d in await received(msg, urgent=urgent)]:
            msg = delivery.msg
            run = delivery.run
            # One delivery per run. start_runs answers by run id, so two deliveries of one run (a
            # redelivered old epoch next to the current one) would both have executed under the
            # attempt of the one that matched: the same (run, epoch) called twice (found by the fault
            # harness). Only the higher epoch can match; an older one is acked and dropped.
            earlier = fresh.get(run.run_id) or self.held.get(run.run_id)
            if earlier is not None:
                metrics.stale_results_total.labels("start").inc()
                if earlier.run.epoch >= run.epoch:
                    if earlier.run.epoch > run.epoch:
                        await quietly(msg.ack())
                    continue  # the same epoch again: the one held already stands for it
                self.held.remove(earlier)
                await quietly(earlier.msg.ack())
            fresh[run.run_id] = delivery
        inline = [d for d in fresh.values() if d.inline]
        for d in fresh.values():
            if not d.inline:
                self.held.add(d)
        self._admit(starts, inline)
        await self._hold_or_hand_back([d for d in fresh.values() if d in self.held])

    async def _hold_or_hand_back(self, newly_held: list[Delivery]) -> None:
        """What could not start waits here, up to a fetch batch in all; beyond that the newest runs
        of the tenant using this worker most go back to the stream for a while. Either way their
        dispatch lease is renewed (the heartbeat renews what stays held)."""
        handed_back: list[Delivery] = []
        while len(self.held) > self.settings.worker_fetch_batch:
            message = self.held.newest_message_of_heaviest(lambda t: self.slots.running[t])
            if not message:  # every message held has runs started: they stay, over the bound
                break
            handed_back += message
        metrics.runs_held_back.set(len(self.held))
        metrics.runs_handed_back_total.inc(len(handed_back))
        await self.completer.renew([d for d in newly_held if d in self.held] + handed_back)
        for d in handed_back:
            await quietly(d.msg.nak(delay=self.nak_delay))

    # ── starting ──

    def _admit(self, starts: set[asyncio.Task[None]], inline: list[Delivery] | None = None) -> None:
        """Give free slots to held runs, fairest first (fairness.py), and start them with `inline`."""
        batch = list(inline or [])
        while (tenant := self.slots.pick(self.held.tenants())) is not None:
            batch.append(self.held.next_to_start(tenant))
            self.slots.take(tenant)
        if batch:
            start = asyncio.create_task(self._start(batch))
            starts.add(start)
            start.add_done_callback(functools.partial(self._started, starts=starts))

    def _started(self, task: asyncio.Task[None], *, starts: set[asyncio.Task[None]]) -> None:
        starts.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("starting a batch failed", exc_info=task.exception())
            metrics.unexpected_errors_total.labels("start").inc()

    def _holding(self) -> list[Delivery]:
        """The runs whose messages this worker holds unanswered (outcomes aside: the completer's)."""
        return [*self.held, *self.starting, *self.executing.values()]

    async def _start(self, batch: list[Delivery]) -> None:
        self.starting.update(batch)
        try:
            await self._start_batch(batch)
        finally:
            self.starting.difference_update(batch)
            self.cancels.forget(batch)

    async def _start_batch(self, batch: list[Delivery]) -> None:
        while True:
            try:
                async with self.pool.acquire() as conn:
                    sent = time.monotonic()
                    started = await transitions.start_runs(
                        conn,
                        Fence([d.fence() for d in batch]),
                        [d.inline for d in batch],
                        owner=self.settings.owner,
                        lease_seconds=self.settings.lease_seconds,
                    )
                break
            except DB_ERRORS as exc:
                if self.stopping.is_set() or not is_transient(exc):
                    # Handed back: redelivered later, or rescued by the reaper when the lease lapses.
                    log.warning("start: %s; handing %d runs back", exc, len(batch))
                    for d in batch:
                        self._free_slot(d)
                        await quietly(d.msg.nak())
                    return
                log.warning("start: %s; retrying", exc)
                await asyncio.sleep(1.0)
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
                self._free_slot(d)
                await quietly(d.msg.ack())
                continue
            d.attempt = attempt
            d.lease_until = sent + self.settings.lease_seconds
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
                self._free_slot(d)
                await quietly(d.msg.ack())
                continue
            task = asyncio.create_task(self.executor.execute(d))
            self.executing[task] = d
            task.add_done_callback(self._executed)

    def _free_slot(self, d: Delivery) -> None:
        if not d.inline:
            self.slots.give_back(d.tenant)
            self._slot_freed.set()

    def _executed(self, task: asyncio.Task[None]) -> None:
        delivery = self.executing.pop(task)
        self._free_slot(delivery)
        if delivery.stopped:
            self.cancels.acknowledge(delivery)
        elif not task.cancelled():  # cancelled otherwise: at shutdown, which hands it back
            self.completer.add(delivery)
