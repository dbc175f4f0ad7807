"""Claimed runs made into JetStream messages, one run at a time.

A run's payload is a tenant's data: one nested too deep once killed every engine that claimed it in
turn. A run whose message cannot be built is set aside with the reason, to fail alone; the rest of
its batch goes out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import asyncpg
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from app.bus.message import RunMessage
from app.bus.publisher import Outgoing
from app.config import Settings
from app.services.validation import MAX_ERROR_CHARS, storable_text
from app.telemetry.tracing import inject, link_to, recording, tracer, unsampled_traceparent

_tracer = tracer(__name__)


@dataclass
class Built:
    """A claimed batch made into messages: the runs that have one, and those that cannot (and why)."""

    rows: list[asyncpg.Record] = field(default_factory=list)
    messages: list[Outgoing] = field(default_factory=list)
    unbuildable: list[tuple[asyncpg.Record, str]] = field(default_factory=list)


def build_messages(claimed: Sequence[asyncpg.Record], settings: Settings) -> Built:
    built = Built()
    exporting = recording()
    for row in claimed:
        try:
            message = RunMessage.from_claimed(row)
            body = message.encode()
        except Exception as exc:  # the tenant's data, not the engine, is at fault: that run fails
            reason = f"the run's message cannot be built: {type(exc).__name__}: {exc}"
            built.unbuildable.append((row, storable_text(reason, MAX_ERROR_CHARS)))
            continue
        if exporting:
            # One producer span per run, linked to the request that submitted it; its context
            # travels in the message headers so the worker's execution span is its child.
            span = _tracer.start_span(
                "dispatch_run",
                kind=SpanKind.PRODUCER,
                links=link_to(row["traceparent"]),
                attributes={"scheduler.run_id": str(message.run_id), "scheduler.epoch": message.epoch},
            )
            headers = inject({"Nats-Msg-Id": message.msg_id}, trace.set_span_in_context(span))
            span.end()
        else:
            # Nothing records the span, so its context is all there is to it: formatted directly
            # it costs about a microsecond, where the SDK's non-recording span cost 25 (measured).
            headers = {"Nats-Msg-Id": message.msg_id, "traceparent": unsampled_traceparent()}
        built.rows.append(row)
        subject = settings.subject_for(message.tenant_id, row["priority"])
        built.messages.append(Outgoing(subject, body, headers))
    return built
