"""The worker loop.

Per fetch, one statement starts every delivery whose epoch still matches (the rest are duplicates,
stale or cancelled: acked and dropped); a noop, having nothing to execute, is recorded succeeded by
that same statement. Targets run concurrently, bounded by the concurrency setting. Outcomes go to a
group commit: one statement records many, then their messages are acked, so a run's message is
acked only after its outcome is durable. While a target runs, heartbeats tell JetStream
(`in_progress`) and Postgres (lease) that the worker is alive.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from app.bus.hot_index import HotIndex
from app.bus.jetstream import PullConsumer, ensure_consumer
from app.bus.message import RunMessage, UnknownVersion
from app.config import Settings
from app.db import dispatch as dispatch_repo
from app.db import tenants as tenant_repo
from app.db.dispatch import Fence
from app.telemetry import metrics
from app.telemetry.tracing import child_traceparent, extract, inject, recording, tracer
from app.worker.targets import AttemptFailed, Handler, RunContext, call_http, load_handlers

log = logging.getLogger(__name__)
_tracer = tracer(__name__)
FLUSH_MAX = 500
START_BATCHES_IN_FLIGHT = 2
FLUSH_DELAY = 0.002  # seconds an outcome may wait for company in the group commit
_EXECUTION_DURATION: dict[str, Any] = {}  # histogram children by target type, looked up once
# What an unreachable or restarting database raises: wait and retry. A connection that dies under
# the pool's reset raises asyncpg's InternalClientError, which is neither a PostgresError nor an
# InterfaceError: uncaught, it ended every worker at a Postgres restart (found by the fault harness).
DB_ERRORS = (
    OSError,
    TimeoutError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)


@dataclass
class Delivery:
    msg: Msg
    run: RunMessage
    attempt: int = 0
    ok: bool = False
    error: str | None = None

    def fence(self) -> tuple[Any, Any, int]:
        return (self.run.run_id, self.run.scheduled_at, self.run.epoch)

    @property
    def inline(self) -> bool:
        """Nothing to execute: the start statement records the outcome too."""
        return self.run.target.get("type") == "noop"


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
        self.hot_index = hot_index
        self.handlers = load_handlers() if handlers is None else handlers
        self.slots = asyncio.Semaphore(settings.worker_concurrency)
        self.executing: dict[asyncio.Task[None], Delivery] = {}
        self.outcomes: asyncio.Queue[Delivery] = asyncio.Queue()
        self._starting = 0  # messages fetched whose start statement has not answered yet
        self.unflushed: list[Delivery] = []
        self._secrets: dict[str, tuple[str, float]] = {}
        self._succeeded_inline = metrics.run_outcomes_total.labels("succeeded")
        self.http = httpx.AsyncClient(limits=httpx.Limits(max_connections=settings.worker_concurrency))

    # ── the loop ──

    async def run(self, stop: asyncio.Event) -> None:
        s = self.settings
        await ensure_consumer(self.js, s)
        sub = PullConsumer(self.nc, s.stream, s.consumer)
        await sub.start()
        starts: set[asyncio.Task[None]] = set()
        flusher = asyncio.create_task(self._flush_loop(), name="flusher")
        heartbeat = asyncio.create_task(self._heartbeat_loop(), name="heartbeat")
        try:
            while not stop.is_set():
                for task in (flusher, heartbeat):
                    if task.done():
                        # Without its flusher the worker would take work it never records, without
                        # heartbeats every lease would lapse: stop, and let the process be restarted.
                        raise RuntimeError(f"worker task {task.get_name()} died") from task.exception()
                # The next batch is fetched while the last one's start statement is in flight: a
                # strict fetch -> start -> fetch loop left the worker waiting on one or the other.
                free = s.worker_concurrency - len(self.executing) - self._starting
                if free <= 0 or len(starts) >= START_BATCHES_IN_FLIGHT:
                    busy = list(self.executing) + list(starts)
                    await asyncio.wait(busy, timeout=0.5, return_when=asyncio.FIRST_COMPLETED)
                    continue
                try:
                    msgs = await sub.fetch(min(free, s.worker_fetch_batch), timeout=1.0)
                    if not msgs:
                        continue
                except Exception as exc:  # NATS reconnecting: wait it out
                    log.warning("fetch: %s", exc)
                    await asyncio.sleep(0.5)
                    continue
                self._starting += len(msgs)
                start = asyncio.create_task(self._start(msgs))
                starts.add(start)
                start.add_done_callback(functools.partial(self._started, count=len(msgs), starts=starts))
        finally:
            if starts:
                await asyncio.wait(list(starts))
            await sub.stop()
            for msg in sub.drain_local():  # delivered to this worker, never started: hand them back
                await _quietly(msg.nak())
            await self._drain(s.worker_grace_seconds)
            flusher.cancel()
            heartbeat.cancel()
            await asyncio.gather(flusher, heartbeat, return_exceptions=True)
            await self.http.aclose()

    async def _drain(self, grace: float) -> None:
        """Stop taking work; let what runs finish within the grace period. What does not is naked
        for redelivery and left to the reaper, exactly like a lost worker: nothing is lost."""
        if self.executing:
            await asyncio.wait(list(self.executing), timeout=grace)
        for task, delivery in list(self.executing.items()):
            task.cancel()
            await _quietly(delivery.msg.nak())
        await self._flush_all()

    def _started(self, task: asyncio.Task[None], *, count: int, starts: set[asyncio.Task[None]]) -> None:
        self._starting -= count
        starts.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("starting a batch failed: %r", task.exception())

    async def _start(self, msgs: list[Msg]) -> None:
        deliveries: dict[Any, Delivery] = {}  # by run id
        for msg in msgs:
            try:
                run = RunMessage.decode(msg.data)
            except UnknownVersion:
                await _quietly(msg.nak(delay=5))  # for a newer replica to take
                continue
            except (ValueError, KeyError, TypeError):
                log.error("dropping a malformed message on %s", msg.subject)
                await _quietly(msg.term())
                continue
            # One delivery per run per fetch. start_runs answers by run id, so two deliveries of one run
            # (a redelivered old epoch next to the current one) would both have executed under the
            # attempt of the one that matched: the same (run, epoch) called twice (found by the fault
            # harness). The higher epoch is the only one that can match: an older epoch can never
            # start once a newer one was claimed, so it is acked and dropped here.
            earlier = deliveries.get(run.run_id)
            if earlier is not None:
                metrics.stale_results_total.labels("start").inc()
                if earlier.run.epoch >= run.epoch:
                    await _quietly(msg.ack())
                    continue
                await _quietly(earlier.msg.ack())
            deliveries[run.run_id] = Delivery(msg, run)
        if not deliveries:
            return
        batch = list(deliveries.values())
        while True:
            try:
                async with self.pool.acquire() as conn:
                    started = await dispatch_repo.start_runs(
                        conn,
                        Fence([d.fence() for d in batch]),
                        [d.inline for d in batch],
                        owner=self.settings.owner,
                        lease_seconds=self.settings.lease_seconds,
                    )
                break
            except DB_ERRORS as exc:
                log.warning("start: %s; retrying", exc)
                for d in batch:
                    await _quietly(d.msg.in_progress())
                await asyncio.sleep(1.0)
        for d in batch:
            attempt = started.get(d.run.run_id)
            if attempt is None:
                # A duplicate delivery, a stale epoch (the run was rescued) or a cancelled run.
                metrics.stale_results_total.labels("start").inc()
                await _quietly(d.msg.ack())
                continue
            d.attempt = attempt
            if d.inline:
                # Started and succeeded in the one statement above: durable, so acked now. A span
                # only if one is recorded (nothing else would see its context).
                d.ok = True
                if recording():
                    self._finish_span(d, self._start_span(d), time.perf_counter())
                else:
                    self._observe_duration(d, 0.0)
                self._succeeded_inline.inc()
                await _quietly(d.msg.ack())
                continue
            task = asyncio.create_task(self._execute(d))
            self.executing[task] = d
            task.add_done_callback(self._executed)

    def _executed(self, task: asyncio.Task[None]) -> None:
        delivery = self.executing.pop(task)
        if not task.cancelled():
            self.outcomes.put_nowait(delivery)

    def _start_span(self, d: Delivery) -> trace.Span:
        # The execution span is the child of the engine's dispatch span, whose context came in
        # the message headers.
        run = d.run
        return _tracer.start_span(
            "execute_run",
            context=extract(d.msg.headers),
            kind=SpanKind.CONSUMER,
            attributes={
                "scheduler.run_id": str(run.run_id),
                "scheduler.attempt": d.attempt,
                "scheduler.epoch": run.epoch,
            },
        )

    def _finish_span(self, d: Delivery, span: trace.Span, started: float) -> None:
        if not d.ok:
            span.set_status(Status(StatusCode.ERROR, d.error))
        span.end()
        self._observe_duration(d, time.perf_counter() - started)

    def _observe_duration(self, d: Delivery, seconds: float) -> None:
        target_type = str(d.run.target.get("type"))
        duration = _EXECUTION_DURATION.get(target_type) or metrics.execution_duration_seconds.labels(
            target_type
        )
        _EXECUTION_DURATION[target_type] = duration
        duration.observe(seconds)

    async def _execute(self, d: Delivery) -> None:
        run = d.run
        started = time.perf_counter()
        span = self._start_span(d) if recording() else None
        token = None
        if span is not None:
            # The target gets this span's traceparent; the span is current only around the call
            # itself (a python handler may open children), not around the bookkeeping.
            span_context = trace.set_span_in_context(span)
            traceparent = inject({}, span_context).get("traceparent")
            token = otel_context.attach(span_context)
        else:
            # Nothing records spans: the target still gets a child of the dispatch span's context,
            # formatted directly. The SDK's unrecorded span, with its header parsing, was a quarter
            # of the worker's CPU on a python target (py-spy).
            headers = d.msg.headers or {}
            traceparent = child_traceparent(headers.get("traceparent"))
        context = RunContext(str(run.run_id), run.tenant_id, run.job, d.attempt, run.epoch, traceparent)
        try:
            async with asyncio.timeout(run.timeout_seconds):
                await self._call(run, context)
            d.ok = True
        except TimeoutError:
            d.error = f"timed out after {run.timeout_seconds:g}s"
        except AttemptFailed as exc:
            d.error = str(exc)
        except Exception as exc:
            d.error = f"{type(exc).__name__}: {exc}"
        finally:
            if token is not None:
                otel_context.detach(token)
        logging.getLogger("app.worker.outcomes").info(
            "run %s attempt %d: %.300s", run.run_id, d.attempt, d.error or "ok"
        )
        if span is not None:
            self._finish_span(d, span, started)
        else:
            self._observe_duration(d, time.perf_counter() - started)

    async def _call(self, run: RunMessage, context: RunContext) -> None:
        kind = run.target.get("type")
        if kind == "python":
            handler = self.handlers.get(run.target["handler"])
            if handler is None:
                name = run.target["handler"]
                raise AttemptFailed(f"python handler {name!r} is not registered on this worker")
            await handler(run.payload, context)
            return
        if kind == "http":
            secret = await self._signing_secret(run.tenant_id)
            await call_http(
                self.http,
                run.target,
                run.payload,
                context,
                secret,
                run.timeout_seconds,
                self.settings.allow_private_targets,
            )
            return
        raise AttemptFailed(f"unknown target type {kind!r}")

    async def _signing_secret(self, tenant_id: str) -> str:
        cached = self._secrets.get(tenant_id)
        if cached is not None and time.monotonic() - cached[1] < 60:
            return cached[0]
        async with self.pool.acquire() as conn:
            secrets = await tenant_repo.get_signing_secrets(conn, [tenant_id])
        if tenant_id not in secrets:
            raise AttemptFailed(f"tenant {tenant_id!r} no longer exists")
        self._secrets[tenant_id] = (secrets[tenant_id], time.monotonic())
        return secrets[tenant_id]

    # ── group commit of outcomes ──

    async def _flush_loop(self) -> None:
        while True:
            self.unflushed.append(await self.outcomes.get())
            await asyncio.sleep(FLUSH_DELAY)
            await self._flush_all()

    async def _flush_all(self) -> None:
        while not self.outcomes.empty():
            self.unflushed.append(self.outcomes.get_nowait())
        while self.unflushed:
            batch, self.unflushed = self.unflushed[:FLUSH_MAX], self.unflushed[FLUSH_MAX:]
            try:
                await self._record(batch)
            except DB_ERRORS as exc:
                log.warning("recording %d outcomes failed: %s; retrying", len(batch), exc)
                self.unflushed = batch + self.unflushed
                await asyncio.sleep(1.0)

    async def _record(self, batch: list[Delivery]) -> None:
        async with self.pool.acquire() as conn:
            rows = await dispatch_repo.finish_runs(
                conn, Fence([d.fence() for d in batch]), [d.ok for d in batch], [d.error for d in batch]
            )
        recorded = {r["id"] for r in rows}
        for row in rows:
            metrics.run_outcomes_total.labels(row["status"]).inc()
        stale = len(batch) - len(recorded)
        if stale:
            # The run was rescued while this worker ran it: the late result is discarded.
            metrics.stale_results_total.labels("finish").inc(stale)
        for d in batch:
            await _quietly(d.msg.ack())
        if self.hot_index is not None:
            await self.hot_index.add([r for r in rows if r["status"] == "pending"])

    # ── heartbeats ──

    async def _heartbeat_loop(self) -> None:
        interval = self.settings.lease_seconds / 3
        while True:
            await asyncio.sleep(interval)
            alive = list(self.executing.values()) + list(self.unflushed)
            if not alive:
                continue
            for d in alive:
                await _quietly(d.msg.in_progress())
            try:
                async with self.pool.acquire() as conn:
                    await dispatch_repo.heartbeat_runs(
                        conn, Fence([d.fence() for d in alive]), self.settings.lease_seconds
                    )
            except DB_ERRORS as exc:
                log.warning("heartbeat: %s", exc)


async def _quietly(awaitable: Any) -> None:
    """Acks and naks are best effort: a lost ack means a redelivery, which the epoch fence drops."""
    try:
        await awaitable
    except Exception as exc:
        log.debug("nats ack/nak failed: %s", exc)
