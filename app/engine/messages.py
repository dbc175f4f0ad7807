"""Claimed runs made into JetStream messages: each run encoded alone, then the runs of one subject
(one tenant, one lane) that one claim took joined into messages of up to MESSAGE_RUNS runs.

A run's payload is a tenant's data: one nested too deep once killed every engine that claimed it in
turn. A run whose entry cannot be encoded is set aside with the reason, to fail alone; the rest of
its batch goes out. A message never mixes tenants, so what a worker does with one message (hold it
back, hand it back) concerns one tenant."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import asyncpg
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from app.bus.message import RunMessage, message_of
from app.bus.publisher import Outgoing
from app.config import Settings
from app.services.validation import MAX_ERROR_CHARS, storable_text
from app.telemetry.tracing import inject, link_to, recording, tracer, unsampled_traceparent

_tracer = tracer(__name__)
# A message's body at most (runs are added while they fit; a larger run goes alone): half of
# nats-server's default max_payload (1 MiB), or less where the server allows less.
MAX_MESSAGE_BYTES = 512 * 1024
_ENVELOPE_BYTES = len(message_of([]))


@dataclass
class Built:
    """A claimed batch made into messages: the runs that have one, in message order (`sizes`: how
    many runs each message carries), and those that cannot have one (and why)."""

    rows: list[asyncpg.Record] = field(default_factory=list)
    messages: list[Outgoing] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    urgent: int = 0  # messages of the urgent lane
    unbuildable: list[tuple[asyncpg.Record, str]] = field(default_factory=list)

    def run_flags(self, message_flags: Sequence[bool]) -> list[bool]:
        """Per message (a PubAck, say) to per run, in `rows` order."""
        return [flag for flag, n in zip(message_flags, self.sizes, strict=True) for _ in range(n)]


def build_messages(
    claimed: Sequence[asyncpg.Record], settings: Settings, max_bytes: int = MAX_MESSAGE_BYTES
) -> Built:
    # Each run's entry, grouped by subject in the order the claim ranked them.
    by_subject: dict[str, list[tuple[asyncpg.Record, RunMessage, bytes]]] = {}
    built = Built()
    exporting = recording()
    for row in claimed:
        try:
            if exporting:
                # One producer span per run, linked to the request that submitted it; its context
                # travels in the run's entry so the worker's execution span is its child.
                span = _tracer.start_span(
                    "dispatch_run",
                    kind=SpanKind.PRODUCER,
                    links=link_to(row["traceparent"]),
                    attributes={"scheduler.run_id": str(row["id"]), "scheduler.epoch": row["epoch"]},
                )
                traceparent = inject({}, trace.set_span_in_context(span)).get("traceparent")
                span.end()
            else:
                # Nothing records the span, so its context is all there is to it: formatted directly
                # it costs about a microsecond, where the SDK's non-recording span cost 25 (measured).
                traceparent = unsampled_traceparent()
            message = RunMessage.from_claimed(row, traceparent)
            entry = message.entry()
        except Exception as exc:  # the tenant's data, not the engine, is at fault: that run fails
            reason = f"the run's message cannot be built: {type(exc).__name__}: {exc}"
            built.unbuildable.append((row, storable_text(reason, MAX_ERROR_CHARS)))
            continue
        subject = settings.subject_for(message.tenant_id, row["priority"])
        by_subject.setdefault(subject, []).append((row, message, entry))
    for subject, runs in by_subject.items():
        group: list[tuple[asyncpg.Record, RunMessage, bytes]] = []
        size = _ENVELOPE_BYTES
        for run in runs:
            if group and (len(group) >= settings.message_runs or size + len(run[2]) + 1 > max_bytes):
                _add(built, subject, group, settings)
                group, size = [], _ENVELOPE_BYTES
            group.append(run)
            size += len(run[2]) + 1
        _add(built, subject, group, settings)
    return built


def _add(
    built: Built, subject: str, group: list[tuple[asyncpg.Record, RunMessage, bytes]], settings: Settings
) -> None:
    # The first run's (run, epoch) names the message: each is claimed into exactly one message.
    headers = {"Nats-Msg-Id": group[0][1].msg_id}
    built.messages.append(Outgoing(subject, message_of([entry for _, _, entry in group]), headers))
    built.sizes.append(len(group))
    built.urgent += settings.is_urgent(group[0][0]["priority"])  # a message's runs share a lane
    built.rows.extend(row for row, _, _ in group)
