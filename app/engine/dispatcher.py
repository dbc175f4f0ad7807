"""The claim loops: claim a batch (claims.py picks the claim), send it to JetStream, and while its
PubAcks come back claim the next one; a settler releases to pending whatever JetStream did not ack.
A second loop claims the urgent runs alone and sends them to their own lane.

The claim itself gives each run its dispatch lease, so an acked batch needs no second write: a
separate "mark published" UPDATE was a fifth of the loop's time (measured; see docs/bench.md), and
the only case it served, an engine dying between claim and publish, the reaper covers after the lease.

Overlapping the batches keeps the database and NATS busy at once: in a strict claim -> publish ->
mark loop the process waited on one or the other half of the time (measured; see docs/bench.md).
A run due now is dispatched within a second: submissions NOTIFY idle engines, and the loop polls
with a short jittered sleep otherwise (the jitter keeps replicas from synchronizing their claims).

No single run can stop the loop: a run whose message cannot be built fails alone (messages.py), and
an unexpected exception in one batch is logged, counted and survived.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Sequence

import asyncpg
from nats.aio.client import Client as NATS

from app.aio import first_of
from app.bus.hot_index import HotIndex
from app.bus.publisher import Publisher, Sent
from app.config import Settings
from app.db import transitions
from app.db.errors import DB_ERRORS
from app.db.transitions import Fence
from app.domain import LEAST_URGENT, RunStatus, on_pending
from app.engine.backlog import Backpressure
from app.engine.claims import EVERY_PRIORITY, Claims, Priorities
from app.engine.floor import ClaimBounds
from app.engine.loop import sleep_or_stop
from app.engine.messages import MAX_MESSAGE_BYTES, Built, build_messages
from app.engine.wakeups import DueListener
from app.telemetry import metrics

log = logging.getLogger(__name__)
# While paused, the queue is asked this often: the workers may empty the room in well under a poll.
PAUSED_RECHECK_SECONDS = 0.25
# A batch's unacked messages are sent again after this, doubled each time up to the cap (jittered).
RETRY_FIRST_SECONDS = 0.25
RETRY_MAX_SECONDS = 2.0


class Dispatcher:
    def __init__(self, settings: Settings, pool: asyncpg.Pool, nc: NATS, hot_index: HotIndex | None = None):
        self.settings = settings
        self.pool = pool
        self.nc = nc
        self.publisher = Publisher(nc)
        self.on_pending = on_pending(hot_index)
        bounds = ClaimBounds()
        self.claims = Claims(settings, bounds, hot_index)
        self.backpressure = Backpressure(nc, settings)
        self.listener = DueListener(pool, bounds)
        self.wake = self.listener.wake
        # With the urgent lane on, urgent runs are the urgent loop's (run_urgent) and the main loop
        # claims the rest: claimed in the main loop's batches of BATCH_SIZE, an urgent run waited
        # for the whole batch to be claimed and sent. A lane this engine does not serve (LANES) has
        # no loop: None.
        self.main_priorities: Priorities | None = EVERY_PRIORITY
        self.urgent_priorities: Priorities | None = None
        urgent = settings.urgent_priority
        if urgent >= 0:
            self.main_priorities = (urgent + 1, LEAST_URGENT) if settings.serves("normal") else None
            self.urgent_priorities = (0, urgent) if settings.serves("urgent") else None
        # Due lag by the lane a run travels in (urgent or not: Settings.subject_for's choice), its
        # two children bound once: a claimed batch observes up to BATCH_SIZE of them.
        self._due_lag = {
            urgent: metrics.due_lag_seconds.labels("urgent" if urgent else "normal")
            for urgent in (True, False)
        }
        # Busy time of each phase, read by the bench: claim SQL, publish (send + PubAcks), and
        # settle (releasing what was not acked).
        self.phase_seconds = {"claim": 0.0, "publish": 0.0, "settle": 0.0}
        self._stop = asyncio.Event()  # run()'s: a stopping engine re-sends nothing more

    def _spent(self, phase: str, seconds: float) -> None:
        self.phase_seconds[phase] += seconds
        metrics.dispatch_phase_seconds_total.labels(phase).inc(seconds)

    # ── the loop ──

    async def run(self, stop: asyncio.Event) -> None:
        self._stop = stop
        slots = asyncio.Semaphore(self.settings.dispatch_batches_in_flight)
        settling: set[asyncio.Task[None]] = set()
        urgent_loop = None
        if self.urgent_priorities is not None:
            urgent_loop = asyncio.create_task(
                self.run_urgent(self.urgent_priorities, stop), name="urgent claims"
            )
        try:
            while not stop.is_set():
                if not await self.listener.listening(stop):
                    continue
                # Each pass reads the queue (at most once a second while there is room), which also
                # renews the urgent lane's room: an engine serving only urgent runs keeps this loop
                # for the listener and that read, and claims nothing here.
                if await self.backpressure.workers_behind() or self.main_priorities is None:
                    self.wake.clear()  # nothing to claim here: a wake-up now would only spin
                    await first_of((stop, self.wake), PAUSED_RECHECK_SECONDS)
                    continue
                await slots.acquire()
                try:
                    built, sent = await self.claim_and_send(self.main_priorities)
                except DB_ERRORS as exc:
                    slots.release()
                    log.warning("dispatch: %s; retrying", exc)
                    await self.listener.close()
                    await sleep_or_stop(stop, 1.0)
                    continue
                except Exception:
                    # A bug, or data no check foresaw: this batch is abandoned (its runs come back when
                    # their dispatch lease lapses), the loop goes on. Ending here stopped every tenant.
                    slots.release()
                    log.exception("dispatch: unexpected error; this batch is left to the reaper")
                    metrics.unexpected_errors_total.labels("dispatch").inc()
                    await sleep_or_stop(stop, 1.0)
                    continue
                if built.rows:
                    messages, urgent = len(built.messages), built.urgent
                    self.backpressure.publishing(messages, urgent, len(built.rows))
                    task = asyncio.create_task(self.settle(built, sent))
                    settling.add(task)
                    task.add_done_callback(settling.discard)
                    task.add_done_callback(functools.partial(self._settled, messages, urgent, slots))
                    task.add_done_callback(_log_settle_failure)
                    # More may be due, so no sleep: a short batch is no proof that the due set is
                    # empty. The per-tenant cap cuts a batch that one tenant crowds to `cap` runs, so
                    # sleeping after a short batch would hold a lone busy tenant to `cap` runs per
                    # poll interval. Only an empty claim sleeps.
                    continue
                else:
                    slots.release()
                interval = self.settings.poll_interval_seconds * random.uniform(0.8, 1.2)
                self.wake.clear()
                await first_of((stop, self.wake), interval)
        finally:
            # Graceful stop: no new claims; the batches in flight settle (acked runs are marked,
            # the rest released to pending), so no lease is left to lapse.
            if settling:
                await asyncio.gather(*settling, return_exceptions=True)
            if urgent_loop is not None:
                await asyncio.gather(urgent_loop, return_exceptions=True)
            await self.listener.close()
            await self.publisher.stop()

    async def run_urgent(self, priorities: Priorities, stop: asyncio.Event) -> None:
        """Claims the urgent runs, beside the main loop, whenever their lane has room: an urgent run
        due now is claimed at once instead of after the batch the main loop is claiming or sending
        (dispatch lag behind a standing backlog, p99: 0.05-0.10 s in one loop, 0.009 s idle;
        docs/bench.md 23). A batch is sent and settled before the next claim: urgent runs come a
        few at a time. It needs no listener of its own: the main loop keeps the one connection
        listening, and every notification wakes both loops."""
        wake = self.listener.another_wake()
        while not stop.is_set():
            wake.clear()
            claimed = False
            if self.backpressure.urgent_room > 0:
                try:
                    built, sent = await self.claim_and_send(priorities)
                    claimed = bool(built.rows or built.unbuildable)
                    if claimed:
                        messages = len(built.messages)
                        self.backpressure.publishing(messages, messages, len(built.rows))
                        try:
                            await self.settle(built, sent)
                        finally:
                            self.backpressure.settled(messages, messages)
                except DB_ERRORS as exc:
                    log.warning("dispatch (urgent): %s; retrying", exc)
                except Exception:
                    log.exception("dispatch (urgent): unexpected error; this batch is left to the reaper")
                    metrics.unexpected_errors_total.labels("dispatch").inc()
            if not claimed:
                await first_of((stop, wake), self.settings.poll_interval_seconds * random.uniform(0.8, 1.2))

    def _settled(
        self, messages: int, urgent: int, slots: asyncio.Semaphore, _task: asyncio.Task[None]
    ) -> None:
        self.backpressure.settled(messages, urgent)
        slots.release()

    async def dispatch_once(self) -> int:
        """Claim, publish and settle one batch without overlap; returns how many runs were sent."""
        built, sent = await self.claim_and_send()
        if built.rows:
            await self.settle(built, sent)
        return len(built.rows)

    # ── phases ──

    async def claim_and_send(self, priorities: Priorities = EVERY_PRIORITY) -> tuple[Built, Sent]:
        """Claim a batch and hand its messages to the connection; `Built.rows` are the runs sent."""
        t0 = time.perf_counter()
        async with self.pool.acquire() as conn:
            claimed = await self.claims.claim(conn, priorities)
        t1 = time.perf_counter()
        self._spent("claim", t1 - t0)
        if not claimed:
            return Built(), Sent(0)
        metrics.claim_batch_size.observe(len(claimed))
        metrics.runs_claimed_total.inc(len(claimed))
        for row in claimed:
            self._due_lag[self.settings.is_urgent(row["priority"])].observe(max(0.0, float(row["lag"])))
        built = self.outgoing(claimed)
        if built.unbuildable:
            await self._fail_unbuildable(built.unbuildable)
        sent = await self.publisher.send(built.messages)
        self._spent("publish", time.perf_counter() - t1)
        return built, sent

    async def _fail_unbuildable(self, unbuildable: list[tuple[asyncpg.Record, str]]) -> None:
        """One statement fails them; if it cannot run, their lease lapses and the next claim retries."""
        metrics.runs_unbuildable_total.inc(len(unbuildable))
        for row, error in unbuildable:
            log.error("run %s of tenant %r failed: %s", row["id"], row["tenant_id"], error)
        fence = Fence([(r["id"], r["scheduled_at"], r["epoch"]) for r, _ in unbuildable])
        try:
            async with self.pool.acquire() as conn:
                failed = await transitions.fail_unbuildable_runs(conn, fence, [e for _, e in unbuildable])
            metrics.run_outcomes_total.labels(RunStatus.FAILED).inc(len(failed))
        except DB_ERRORS as exc:
            log.warning("failing %d unbuildable runs: %s; their lease will lapse", len(unbuildable), exc)

    def outgoing(self, claimed: Sequence[asyncpg.Record]) -> Built:
        return build_messages(claimed, self.settings, self._max_message_bytes())

    def _max_message_bytes(self) -> int:
        """What the server takes (its max_payload, headers aside), at most MAX_MESSAGE_BYTES."""
        server = getattr(self.nc, "max_payload", 0) if self.nc is not None else 0
        return min(MAX_MESSAGE_BYTES, server - 4096) if server > 8192 else MAX_MESSAGE_BYTES

    async def settle(self, built: Built, sent: Sent) -> None:
        """Runs whose message JetStream did not ack, even sent again (`publish_again`), go back to
        pending now, not after their lease. If the database is unreachable here, the lease lapses and
        the reaper does the same."""
        t0 = time.perf_counter()
        acked = await self.publisher.acked(sent, self.settings.publish_timeout_seconds)
        ok_flags = built.run_flags(await self.publish_again(built, acked))
        t1 = time.perf_counter()
        self._spent("publish", t1 - t0)
        metrics.publish_duration_seconds.observe(t1 - t0)
        failed = [
            (r["id"], r["scheduled_at"], r["epoch"])
            for r, a in zip(built.rows, ok_flags, strict=True)
            if not a
        ]
        metrics.runs_published_total.inc(len(built.rows) - len(failed))
        if not failed:
            return
        metrics.publish_failures_total.inc(len(failed))
        try:
            async with self.pool.acquire() as conn:
                released = await transitions.release_unpublished_runs(conn, Fence(failed))
            log.warning("publish failed for %d runs; released %d to pending", len(failed), len(released))
            await self.on_pending(released)
        except DB_ERRORS as exc:
            log.warning(
                "releasing %d unpublished runs failed (%s); the reaper rescues them", len(failed), exc
            )
        self._spent("settle", time.perf_counter() - t1)

    async def publish_again(self, built: Built, acked: list[bool]) -> list[bool]:
        """Send the messages JetStream did not ack again, after a doubling backoff, until it acks them
        all or PUBLISH_RETRY_SECONDS (at most half the dispatch lease, which is still running) pass;
        which are acked now. A stream electing its leader answers "no responders" at once for
        seconds: without the wait the loop claimed, failed and released the same runs over and over.
        Meanwhile this batch holds its slot, so the loop claims at most the batches in flight."""
        s = self.settings
        deadline = time.monotonic() + min(s.publish_retry_seconds, s.dispatch_lease_seconds / 2)
        delay, sends = RETRY_FIRST_SECONDS, 1
        while not all(acked) and not self._stop.is_set():
            wait = delay * random.uniform(0.8, 1.2)
            if time.monotonic() + wait >= deadline:
                break
            await sleep_or_stop(self._stop, wait)
            if self._stop.is_set():
                break
            missing = [i for i, ok in enumerate(acked) if not ok]
            metrics.publish_retries_total.inc(len(missing))
            again = await self.publisher.publish(
                [built.messages[i] for i in missing], s.publish_timeout_seconds
            )
            for i, ok in zip(missing, again, strict=True):
                acked[i] = ok
            delay, sends = min(delay * 2, RETRY_MAX_SECONDS), sends + 1
        if sends > 1:
            log.warning(
                "JetStream acked %d of %d messages, sent up to %d times", sum(acked), len(acked), sends
            )
        return acked


def _log_settle_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("dispatch: settling a batch failed", exc_info=task.exception())
        metrics.unexpected_errors_total.labels("settle").inc()
