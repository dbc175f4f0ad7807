"""One trace from dispatch to execution, across the NATS message (real NATS, in-memory exporter)."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import httpx
import nats
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from app.config import Settings
from app.engine.engine import Engine
from app.telemetry.tracing import setup_tracing
from app.worker.consumer import Worker
from tests.e2e.conftest import wait_for
from tests.receiver import running_receiver


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    """Spans recorded from here on; requested before `api`, so the app is built with its server
    spans (the API installs its OpenTelemetry middleware only when spans are recorded)."""
    memory = InMemorySpanExporter()
    setup_tracing("scheduler-test", SimpleSpanProcessor(memory))
    return memory


async def test_dispatch_and_execution_are_one_trace(
    exporter: InMemorySpanExporter,
    api: httpx.AsyncClient,
    tenant: dict,
    settings: Settings,
    pool: asyncpg.Pool,
) -> None:
    nc = await nats.connect(settings.nats_url)
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(Engine(settings, pool, nc).run(stop)),
        asyncio.create_task(Worker(settings, pool, nc).run(stop)),
    ]
    try:
        async with running_receiver() as receiver:
            r = await api.put(
                "/tenants/acme/jobs/traced",
                json={"target": {"type": "http", "url": receiver.url}},
                headers=tenant["auth"],
            )
            assert r.status_code == 201
            run = (
                await api.post("/tenants/acme/runs", json={"job": "traced"}, headers=tenant["auth"])
            ).json()
            assert (await wait_for(api, run["id"], tenant["auth"], {"succeeded", "failed"}))[
                "status"
            ] == "succeeded"
            [call] = receiver.for_run(run["id"])
    finally:
        stop.set()
        await asyncio.gather(*tasks)
        await nc.close()

    spans = exporter.get_finished_spans()

    def one(name: str):
        matching = [s for s in spans if s.name == name and s.attributes.get("scheduler.run_id") == run["id"]]
        assert len(matching) == 1, [s.name for s in spans]
        return matching[0]

    dispatch, execute = one("dispatch_run"), one("execute_run")
    assert dispatch.kind == SpanKind.PRODUCER and execute.kind == SpanKind.CONSUMER
    assert execute.context.trace_id == dispatch.context.trace_id
    assert execute.parent is not None and execute.parent.span_id == dispatch.context.span_id
    # The webhook receives the execution span's context: same trace, the execute span as parent.
    _, trace_id, parent_id, _ = call.headers["traceparent"].split("-")
    assert int(trace_id, 16) == dispatch.context.trace_id and int(parent_id, 16) == execute.context.span_id
    # The dispatch span links to the submitting request's span, whose traceparent the run stored.
    submit = [
        s
        for s in spans
        if s.kind == SpanKind.SERVER and "/runs" in s.name and s.context.trace_id != dispatch.context.trace_id
    ]
    linked = {link.context.span_id for link in dispatch.links}
    assert any(s.context.span_id in linked for s in submit), (linked, [s.name for s in submit])


async def test_a_run_keeps_its_callers_trace(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    """The stored traceparent (the dispatch span's link) belongs to the caller's trace, whether the API
    records server spans (a child of the caller's) or not (the caller's own)."""
    caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    r = await api.post(
        "/tenants/acme/runs", json={"job": "hello"}, headers={**tenant["auth"], "traceparent": caller}
    )
    assert r.status_code == 201, r.text
    async with pool.acquire() as conn:
        stored = await conn.fetchval(
            "SELECT traceparent FROM job_runs WHERE id = $1", uuid.UUID(r.json()["id"])
        )
    assert stored is not None and stored.split("-")[1] == caller.split("-")[1]
