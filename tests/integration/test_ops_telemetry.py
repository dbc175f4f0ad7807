"""Scrapes and probes record no spans (they were 64 of 71 exported spans), on the API and on the
ops server of engines and workers, while a real request still does (in-memory exporter)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.dev import free_port
from app.telemetry import metrics
from app.telemetry.ops_server import ops_app, serve
from app.telemetry.tracing import setup_tracing

PROBES = ("/metrics", "/healthz", "/readyz")


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    """Requested before `api`, so the app is built recording server spans."""
    memory = InMemorySpanExporter()
    setup_tracing("scheduler-test", SimpleSpanProcessor(memory))
    return memory


async def test_api_probes_record_no_spans_and_requests_do(
    exporter: InMemorySpanExporter, api: httpx.AsyncClient, tenant: dict
) -> None:
    exporter.clear()
    for path in PROBES:
        assert (await api.get(path)).status_code == 200, path
    assert [s.name for s in exporter.get_finished_spans()] == []

    assert (await api.get("/tenants/acme/jobs", headers=tenant["auth"])).status_code == 200
    assert any("/tenants/{tenant_id}/jobs" in s.name for s in exporter.get_finished_spans()), [
        s.name for s in exporter.get_finished_spans()
    ]


async def test_ops_server_records_no_spans(exporter: InMemorySpanExporter) -> None:
    async def ok() -> None:
        return None

    port, stop = free_port(), asyncio.Event()
    server = asyncio.create_task(serve(ops_app({"postgres": ok}), "127.0.0.1", port, stop))
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            for _ in range(100):
                try:
                    await client.get("/healthz")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.05)
            exporter.clear()
            for path in PROBES:
                assert (await client.get(path)).status_code == 200, path
        assert [s.name for s in exporter.get_finished_spans()] == []
    finally:
        stop.set()
        await server


async def test_ops_metrics_render_only_the_series_named() -> None:
    metrics.run_outcomes_total.labels("succeeded").inc(0)  # the series exists, whatever ran before
    transport = httpx.ASGITransport(app=ops_app({}))
    async with httpx.AsyncClient(transport=transport, base_url="http://ops") as client:
        whole = await client.get("/metrics")
        named = await client.get("/metrics", params={"name[]": "scheduler_run_outcomes_total"})
    assert whole.status_code == named.status_code == 200
    samples = [line for line in named.text.splitlines() if not line.startswith("#")]
    assert samples and all(s.startswith("scheduler_run_outcomes_total{") for s in samples), named.text
    assert 'scheduler_run_outcomes_total{status="succeeded"}' in named.text
    assert "process_cpu_seconds_total" in whole.text and "process_cpu_seconds_total" not in named.text
