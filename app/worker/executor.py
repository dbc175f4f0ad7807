"""Executing a started run's target, with its span and duration; what happened goes on the Delivery."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import Any

import asyncpg
import httpx
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from app.aio import Deadline
from app.bus.message import RunMessage
from app.config import Settings
from app.db import dependencies as dependencies_repo
from app.domain import StoredResult
from app.services.answers import result_of_value
from app.telemetry import metrics
from app.telemetry.tracing import child_traceparent, extract, inject, recording, tracer
from app.worker.delivery import Delivery
from app.worker.signing_keys import SigningKeys, UnknownTenant
from app.worker.targets import AnswerLimits, AttemptFailed, Handler, RunContext, call_http

log = logging.getLogger(__name__)
outcomes_log = logging.getLogger("app.worker.outcomes")
_tracer = tracer(__name__)
_EXECUTION_DURATION: dict[str, Any] = {}  # histogram children by target type, looked up once


class Executor:
    def __init__(
        self, settings: Settings, pool: asyncpg.Pool, handlers: dict[str, Handler], max_in_flight: int
    ):
        self.settings = settings
        self.pool = pool
        self.handlers = handlers
        self.signing_keys = SigningKeys(pool, settings.signing_secret_cache_seconds)
        self.answer_limits = AnswerLimits(
            settings.max_result_bytes, settings.max_retry_after_seconds, settings.max_payload_depth
        )
        # A connection for every slot, the reserve included: with fewer, a tenant's hanging calls
        # held every connection and the run that fairness let start waited for one anyway.
        # Identity encoding: the excerpt of an answer is read as sent, never inflated (targets.py).
        self.http = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=max_in_flight),
            headers={"Accept-Encoding": "identity"},
        )

    async def close(self) -> None:
        await self.http.aclose()

    def start_span(self, d: Delivery) -> trace.Span:
        # The execution span is the child of the engine's dispatch span, whose context came with
        # the run in its message.
        run = d.run
        return _tracer.start_span(
            "execute_run",
            context=extract({"traceparent": run.traceparent} if run.traceparent else {}),
            kind=SpanKind.CONSUMER,
            attributes={
                "scheduler.run_id": str(run.run_id),
                "scheduler.attempt": d.attempt,
                "scheduler.epoch": run.epoch,
            },
        )

    def finish_span(self, d: Delivery, span: trace.Span, started: float) -> None:
        if not d.ok:
            span.set_status(Status(StatusCode.ERROR, d.error))
        span.end()
        self.observe_duration(d, time.perf_counter() - started)

    def observe_duration(self, d: Delivery, seconds: float) -> None:
        target_type = str(d.run.target.get("type"))
        duration = _EXECUTION_DURATION.get(target_type) or metrics.execution_duration_seconds.labels(
            target_type
        )
        _EXECUTION_DURATION[target_type] = duration
        duration.observe(seconds)

    async def execute(self, d: Delivery) -> None:
        run = d.run
        started = time.perf_counter()
        span = self.start_span(d) if recording() else None
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
            traceparent = child_traceparent(run.traceparent)
        context = RunContext(str(run.run_id), run.tenant_id, run.job, d.attempt, run.epoch, traceparent)
        try:
            with Deadline(run.timeout_seconds):
                http_status, result = await self._call(run, context, d.lease_until)
            d.succeed(result, http_status)
            if result.truncated:
                metrics.results_truncated_total.inc()
        except TimeoutError:
            d.fail(f"timed out after {run.timeout_seconds:g}s", timed_out=True)
        except AttemptFailed as exc:
            d.fail(_describe(exc, with_type=False), http_status=exc.http_status, retry_after=exc.retry_after)
            if exc.retry_after is not None:
                metrics.retry_after_honoured_total.inc()
        except Exception as exc:
            d.fail(_describe(exc, with_type=True))
        except asyncio.CancelledError:
            # Its run was cancelled (app/worker/cancels.py), or the worker is shutting down: nothing
            # is recorded either way, but the span and the duration say what happened.
            d.fail("cancelled while running" if d.stopped else "stopped: the worker is shutting down")
            raise
        finally:
            if token is not None:
                otel_context.detach(token)
            # Quiet in production (app.cli sets this logger to WARNING); `scheduler dev` shows it.
            outcomes_log.info("run %s attempt %d: %.300s", run.run_id, d.attempt, d.error or "ok")
            if span is not None:
                self.finish_span(d, span, started)
            else:
                self.observe_duration(d, time.perf_counter() - started)

    async def _call(
        self, run: RunMessage, context: RunContext, lease_until: float
    ) -> tuple[int | None, StoredResult]:
        """The target's answer status (a webhook's; None for a handler) and the run's result."""
        kind = run.target.get("type")
        if run.target.get("pass_results"):
            async with self.pool.acquire() as conn:
                context = replace(context, parents=await dependencies_repo.parent_results(conn, run.run_id))
        if kind == "python":
            handler = self.handlers.get(run.target["handler"])
            if handler is None:
                name = run.target["handler"]
                raise AttemptFailed(f"python handler {name!r} is not registered on this worker")
            _still_leased(lease_until)
            value = await handler(run.payload, context)
            return None, result_of_value(
                value, self.settings.max_result_bytes, max_depth=self.settings.max_payload_depth
            )
        if kind == "http":
            try:
                keys = await self.signing_keys.get(run.tenant_id)
            except UnknownTenant:
                raise AttemptFailed(f"tenant {run.tenant_id!r} no longer exists") from None
            _still_leased(lease_until)
            return await call_http(
                self.http,
                run.target,
                run.payload,
                context,
                keys,
                run.timeout_seconds,
                self.settings.allow_private_targets,
                self.answer_limits,
            )
        raise AttemptFailed(f"unknown target type {kind!r}")


def _still_leased(lease_until: float) -> None:
    """The last check before the target hears of the run: a worker frozen since its start (a stopped
    process, a long pause) would otherwise call it after the reaper gave the run, and its
    concurrency slot or rate-limit place, to another worker under a newer epoch. Its outcome is then
    fenced out, or, if the reaper has not come yet, recorded as this failed attempt."""
    if time.monotonic() >= lease_until:
        raise AttemptFailed("the run's lease lapsed before its target was called (the worker was stalled)")


def _describe(exc: BaseException, *, with_type: bool) -> str:
    """A handler's exception may carry anything, even a __str__ that raises."""
    try:
        text = str(exc)
    except Exception:
        text = "(its message could not be read)"
    return f"{type(exc).__name__}: {text}" if with_type else text
