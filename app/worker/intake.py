"""The worker's intake (a service, app/background.py): fetch, hold back what a tenant may not run
yet, and start (starter.py); at stop, hand back whatever will not finish in the grace period.

A message carries several runs of one tenant (app/bus/message.py); from here on each run is a
Delivery of its own, and the message is answered once all of its runs are (delivery.py: Part).

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

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from app.aio import first_of
from app.background import survived
from app.bus.jetstream import lanes
from app.bus.pull import PullConsumer
from app.config import Settings
from app.telemetry import metrics
from app.worker.completer import Completer
from app.worker.delivery import Delivery, quietly, received
from app.worker.fairness import TenantSlots
from app.worker.held import HeldRuns
from app.worker.starter import Starter

log = logging.getLogger(__name__)
START_BATCHES_IN_FLIGHT = 2
PEEK_INTERVAL = 1.0  # seconds between fetches while every slot is taken (at most)
FETCH_RETRY_SECONDS = 0.5  # a fetch that failed is tried again after this (or at once at shutdown)


class Intake:
    name = "intake"

    def __init__(
        self, settings: Settings, nc: NATS, slots: TenantSlots, starter: Starter, completer: Completer
    ):
        self.settings = settings
        self.nc = nc
        self.slots = slots
        self.starter = starter
        self.completer = completer
        self.held = HeldRuns()
        # A run handed back returns at half its renewed dispatch lease, and is renewed again when it
        # does. Meanwhile the worker peeks at least eight times: each peek looks a fetch batch further
        # past the busy tenant's backlog (redeliveries come first), so others' runs behind up to eight
        # batches of it are found before their own dispatch lease lapses.
        self.nak_delay = settings.dispatch_lease_seconds / 2
        self.peek_interval = min(PEEK_INTERVAL, self.nak_delay / 8)

    async def run(self, stop: asyncio.Event) -> None:
        s = self.settings
        # One fetch loop per lane it serves (LANES), each with its own start batches in flight: an
        # urgent run is fetched and started beside the other lane's batches, not after them.
        subs = [PullConsumer(self.nc, lane) for lane in lanes(s) if s.serves(lane.name)]
        starts: list[set[asyncio.Task[None]]] = [set() for _ in subs]
        for sub in subs:
            await sub.start()
        try:
            # The fetches in flight settle (what they brought is held, then handed back below).
            await asyncio.gather(
                *(self._fetch(sub, lane_starts, stop) for sub, lane_starts in zip(subs, starts, strict=True))
            )
        finally:
            await self._hand_back(subs, set().union(*starts))

    def holding(self) -> list[Delivery]:
        """The runs whose messages this worker holds unanswered (outcomes aside: the completer's)."""
        return [*self.held, *self.starter.starting, *self.starter.executing.values()]

    async def _fetch(self, sub: PullConsumer, starts: set[asyncio.Task[None]], stop: asyncio.Event) -> None:
        last_peek = 0.0
        fetch_size = metrics.worker_fetch_size.labels(sub.lane.name)
        carried = self.settings.message_runs  # runs in the largest message of this lane's last fetch
        while not stop.is_set():
            self._admit(starts)
            free = self._free()
            size = self._messages_for(free, carried) if free > 0 else 0
            if free <= 0 and time.monotonic() - last_peek >= self.peek_interval:
                # Every slot taken: peek now and then for tenants under their share, a fetch batch
                # of messages further each time (the runs they bring beyond the held are handed back).
                size, last_peek = self.settings.worker_fetch_batch, time.monotonic()
            if size <= 0 or len(starts) >= START_BATCHES_IN_FLIGHT:
                self.starter.slot_freed.clear()
                await first_of((self.starter.slot_freed, stop), min(0.25, self.peek_interval), tasks=starts)
                continue
            try:
                msgs = await sub.fetch(size, timeout=1.0)
            except Exception as exc:  # NATS reconnecting, the consumer's leader being elected: wait it out
                log.warning("fetch (%s): %s: %s", sub.lane.name, type(exc).__name__, exc)
                await first_of((stop,), FETCH_RETRY_SECONDS)
                continue
            fetch_size.observe(len(msgs))
            if msgs:
                try:
                    largest = await self._receive(msgs, starts, urgent=sub.lane.urgent)
                    carried = min(max(1, largest), self.settings.message_runs)
                except Exception as exc:  # the runs not held are redelivered after ack_wait
                    survived(self.name, exc)

    def _free(self) -> int:
        """Slots free for runs not yet fetched."""
        return self.settings.worker_concurrency - self.slots.total - len(self.held)

    def _messages_for(self, free: int, carried: int) -> int:
        """Messages to ask for: about `free` runs (a fetch batch at most) at `carried` runs a message,
        the most one message of the lane's last fetch carried. Messages carry fewer than MESSAGE_RUNS
        when many tenants share a claim (ten each for 50 tenants in a claim of 500): asked for as if
        each were full, a fetch filled two fifths of the free slots, and the runs started in more and
        smaller statements (docs/bench.md verdict 42). Sized by the largest, not the mean: runs
        fetched beyond the free slots are held, and each fetch that holds any renews their dispatch
        leases, a write of its own. Never more than the free slots and the room to hold take were
        every message full, so nothing goes back to the stream for a fetch that asked too much
        (asked for one message a run, a worker took up to MESSAGE_RUNS times what its slots did and
        handed the rest back). At least one."""
        s = self.settings
        wanted = min(free, s.worker_fetch_batch) // carried
        full = (free + max(0, s.worker_fetch_batch - len(self.held))) // s.message_runs
        return max(1, min(wanted, full))

    async def _hand_back(self, subs: list[PullConsumer], starts: set[asyncio.Task[None]]) -> None:
        """Stop taking work; what runs gets the grace period to finish (the completer records its
        outcome by then, app/worker/consumer.py). What does not finish is handed back exactly like a
        lost worker's (nak, then the lease reaper): nothing is lost, and the process exits within its
        grace period even when the database is away."""
        deadline = time.monotonic() + self.settings.worker_grace_seconds
        self.completer.finish_by = deadline
        self.starter.stopping.set()
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
        executing = self.starter.executing
        if executing:
            await asyncio.wait(list(executing), timeout=max(0.0, deadline - time.monotonic()))
        for task, delivery in list(executing.items()):
            task.cancel()
            await quietly(delivery.msg.nak())
        await asyncio.gather(*starts, return_exceptions=True)

    # ── receiving: decode, de-duplicate, hold ──

    async def _receive(self, msgs: list[Msg], starts: set[asyncio.Task[None]], *, urgent: bool) -> int:
        """Holds or starts the runs `msgs` carry; the most one of them carries."""
        fresh: dict[Any, Delivery] = {}  # by run id
        per_message = [await received(msg, urgent=urgent) for msg in msgs]
        for delivery in [d for runs in per_message for d in runs]:
            msg = delivery.msg
            run = delivery.run
            # One delivery per run. start_runs answers by run id, so two deliveries of one run (a
            # redelivered old epoch next to the current one) would both execute under the attempt
            # of the one that matched: the same (run, epoch) called twice. Only the higher epoch can
            # match; an older one is acked and dropped.
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
        return max(map(len, per_message))

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
        batch += [self.held.next_to_start(tenant) for tenant in self.slots.assign(self.held.waiting())]
        if batch:
            start = asyncio.create_task(self.starter.start(batch))
            starts.add(start)
            start.add_done_callback(functools.partial(self._started, starts=starts))

    def _started(self, task: asyncio.Task[None], *, starts: set[asyncio.Task[None]]) -> None:
        starts.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            survived("start", exc)
