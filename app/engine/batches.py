"""A claimed batch's way out: claim it (claims.py picks the claim), build its messages, send them to
JetStream, then settle: what JetStream did not ack, even sent again, goes back to pending.

The claim itself gives each run its dispatch lease, so an acked batch needs no second write: a
separate "mark published" UPDATE was a fifth of the loop's time, and the only case it served, an
engine dying between claim and publish, the reaper covers after the lease (decision 08).

A run whose message cannot be built fails alone (messages.py); every other run of its batch goes.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Sequence

import asyncpg
from nats.aio.client import Client as NATS

from app import pending
from app.background import sleep_or_stop
from app.bus.publisher import Publisher, Sent
from app.config import Settings
from app.db import transitions
from app.db.errors import DB_ERRORS
from app.db.transitions import Fence
from app.domain import RunStatus
from app.engine.claims import EVERY_PRIORITY, Claims, Priorities
from app.engine.messages import MAX_MESSAGE_BYTES, Built, build_messages
from app.telemetry import metrics

log = logging.getLogger(__name__)
# A batch's unacked messages are sent again after this, doubled each time up to the cap (jittered).
RETRY_FIRST_SECONDS = 0.25
RETRY_MAX_SECONDS = 2.0


class Batches:
    def __init__(self, settings: Settings, pool: asyncpg.Pool, nc: NATS, claims: Claims):
        self.settings = settings
        self.pool = pool
        self.nc = nc
        self.claims = claims
        self.publisher = Publisher(nc)
        # Set when the engine stops: a batch being sent again gives up, its runs released.
        self.stopping = asyncio.Event()
        # Due lag by the lane a run travels in (urgent or not: Settings.subject_for's choice), its
        # two children bound once: a claimed batch observes up to BATCH_SIZE of them.
        self._due_lag = {
            urgent: metrics.due_lag_seconds.labels("urgent" if urgent else "normal")
            for urgent in (True, False)
        }
        # Busy time of each phase (claim SQL, publish: send + PubAcks, settle: releasing what was not
        # acked), bound once.
        self._phase = {
            p: metrics.dispatch_phase_seconds_total.labels(p) for p in ("claim", "publish", "settle")
        }

    async def claim_and_send(self, priorities: Priorities = EVERY_PRIORITY) -> tuple[Built, Sent]:
        """Claim a batch and hand its messages to the connection; `Built.rows` are the runs sent."""
        t0 = time.perf_counter()
        async with self.pool.acquire() as conn:
            claimed = await self.claims.claim(conn, priorities)
        t1 = time.perf_counter()
        self._phase["claim"].inc(t1 - t0)
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
        self._phase["publish"].inc(time.perf_counter() - t1)
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
        self._phase["publish"].inc(t1 - t0)
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
            await pending.runs_pending(released)
        except DB_ERRORS as exc:
            log.warning(
                "releasing %d unpublished runs failed (%s); the reaper rescues them", len(failed), exc
            )
        self._phase["settle"].inc(time.perf_counter() - t1)

    async def publish_again(self, built: Built, acked: list[bool]) -> list[bool]:
        """Send the messages JetStream did not ack again, after a doubling backoff, until it acks them
        all or PUBLISH_RETRY_SECONDS (at most half the dispatch lease, which is still running) pass;
        which are acked now. A stream electing its leader answers "no responders" at once for
        seconds: without the wait the loop would claim, fail and release the same runs over and over.
        Meanwhile this batch holds its slot, so the loop claims at most the batches in flight."""
        s = self.settings
        deadline = time.monotonic() + min(s.publish_retry_seconds, s.dispatch_lease_seconds / 2)
        delay, sends = RETRY_FIRST_SECONDS, 1
        while not all(acked) and not self.stopping.is_set():
            wait = delay * random.uniform(0.8, 1.2)
            if time.monotonic() + wait >= deadline:
                break
            await sleep_or_stop(self.stopping, wait)
            if self.stopping.is_set():
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
