"""Readiness that tells the truth, with real `scheduler` processes: an API without an engine needs
only Postgres; a process that cannot reach Postgres or NATS opens its port, answers /healthz, says
503 on /readyz while it retries, stops at once on SIGTERM, and becomes ready when the dependency
comes up."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from app.dev import EmbeddedNats, free_port
from tests.processes import Process, processes
from tests.support import ADMIN_TOKEN, bearer


def closed_port_url(scheme: str) -> str:
    """A URL nothing listens on (a port just found free)."""
    return f"{scheme}://127.0.0.1:{free_port()}" + ("/scheduler" if scheme == "postgresql" else "")


async def answer(process: Process, path: str, timeout: float = 20.0) -> httpx.Response:
    """The first answer of the process on `path`: its port must open although it is not ready."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2) as client:
        while True:
            assert process.proc.poll() is None, f"{process.role} exited:\n{process.output()}"
            try:
                return await client.get(f"http://127.0.0.1:{process.port}{path}")
            except httpx.TransportError:
                assert time.monotonic() < deadline, (
                    f"{process.role} never opened its port:\n{process.output()}"
                )
                await asyncio.sleep(0.1)


def stop_within(process: Process, seconds: float) -> float:
    started = time.monotonic()
    process.stop(timeout=seconds + 5)
    took = time.monotonic() - started
    assert took < seconds, f"{process.role} took {took:.1f}s to stop on SIGTERM:\n{process.output()}"
    return took


async def test_api_without_engine_is_ready_and_takes_runs_with_nats_down(
    settings: Settings, tmp_path: Path
) -> None:
    async with processes(settings, tmp_path) as spawn:
        api = spawn("api", SCHEDULER_ENGINE="off", SCHEDULER_NATS_URL=closed_port_url("nats"))
        await api.wait_ready(timeout=30)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api.port}", timeout=10) as client:
            ready = await client.get("/readyz")
            assert ready.status_code == 200 and set(ready.json()["checks"]) == {"postgres", "started"}
            created = await client.post("/tenants", json={"id": "acme"}, headers=bearer(ADMIN_TOKEN))
            assert created.status_code == 201, created.text
            key = bearer(created.json()["api_key"])
            job = await client.put("/tenants/acme/jobs/hello", json={"target": {"type": "noop"}}, headers=key)
            assert job.status_code == 201, job.text
            run = await client.post("/tenants/acme/runs", json={"job": "hello"}, headers=key)
            assert run.status_code == 201, run.text
            assert run.json()["status"] == "pending"


@pytest.mark.parametrize("role", ["engine", "worker"])
async def test_a_process_without_postgres_is_live_not_ready_and_stops_at_once(
    settings: Settings, tmp_path: Path, role: str
) -> None:
    async with processes(settings, tmp_path) as spawn:
        process = spawn(role, SCHEDULER_DATABASE_URL=closed_port_url("postgresql"))
        assert (await answer(process, "/healthz")).status_code == 200
        await asyncio.sleep(1.5)  # a few failed attempts: still answering, still not ready
        ready = await answer(process, "/readyz")
        assert ready.status_code == 503, ready.text
        assert ready.json()["checks"]["postgres"].startswith("failing")
        assert (await answer(process, "/metrics")).status_code == 200
        stop_within(process, 2.0)
        assert process.proc.returncode == 0, process.output()


async def test_api_with_engine_without_postgres_is_live_not_ready_and_stops_at_once(
    settings: Settings, tmp_path: Path
) -> None:
    async with processes(settings, tmp_path) as spawn:
        api = spawn("api", SCHEDULER_DATABASE_URL=closed_port_url("postgresql"))
        assert (await answer(api, "/healthz")).status_code == 200
        ready = await answer(api, "/readyz")
        assert ready.status_code == 503, ready.text
        assert ready.json()["checks"]["postgres"].startswith("failing")
        async with httpx.AsyncClient(timeout=15) as client:  # a request waits 5 s for start-up, then 503
            refused = await client.get(
                f"http://127.0.0.1:{api.port}/tenants/acme/jobs", headers=bearer(ADMIN_TOKEN)
            )
        assert refused.status_code == 503, refused.text  # never a 500 while starting
        assert refused.headers["retry-after"]
        stop_within(api, 3.0)


@pytest.mark.parametrize("role", ["engine", "worker"])
async def test_a_process_becomes_ready_when_nats_comes_up_later(
    settings: Settings, tmp_path: Path, role: str
) -> None:
    nats = EmbeddedNats(tmp_path / "nats", port=free_port())
    async with processes(settings, tmp_path) as spawn:
        process = spawn(role, SCHEDULER_NATS_URL=nats.url())
        deadline = time.monotonic() + 20
        while True:  # Postgres is reached, NATS is not: not ready, and saying why
            ready = await answer(process, "/readyz")
            assert ready.status_code == 503 and ready.json()["checks"]["nats"].startswith("failing"), (
                ready.text
            )
            if ready.json()["checks"]["postgres"] == "ok":
                break
            assert time.monotonic() < deadline, ready.text
            await asyncio.sleep(0.2)
        await asyncio.sleep(2)
        try:
            await asyncio.to_thread(nats.start)
            # Backoff doubles to at most 10 s (jittered by 20 %): ready within one more attempt.
            await process.wait_ready(timeout=20)
        finally:
            process.stop(timeout=10)
            nats.stop()


async def test_the_ops_server_binds_scheduler_host(settings: Settings, tmp_path: Path) -> None:
    """Bound to 127.0.0.2 (loopback too on Linux), the ops port is not open on 127.0.0.1: it binds
    SCHEDULER_HOST, not every interface."""
    async with processes(settings, tmp_path) as spawn:
        worker = spawn("worker", SCHEDULER_HOST="127.0.0.2")
        deadline = time.monotonic() + 30
        async with httpx.AsyncClient(timeout=2) as client:
            while True:
                assert worker.proc.poll() is None, worker.output()
                try:
                    if (await client.get(f"http://127.0.0.2:{worker.port}/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, worker.output()
                await asyncio.sleep(0.1)
            with pytest.raises(httpx.ConnectError):
                await client.get(f"http://127.0.0.1:{worker.port}/healthz")


async def test_api_with_engine_serves_while_nats_is_down_but_is_not_ready(
    settings: Settings, tmp_path: Path
) -> None:
    """Its routes need Postgres alone; its engine needs NATS too, so the pod is not ready (it would
    dispatch nothing), yet a request that reaches it is served."""
    async with processes(settings, tmp_path) as spawn:
        api = spawn("api", SCHEDULER_ENGINE="on", SCHEDULER_NATS_URL=closed_port_url("nats"))
        assert (await answer(api, "/healthz")).status_code == 200
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api.port}", timeout=15) as client:
            created = await client.post("/tenants", json={"id": "acme"}, headers=bearer(ADMIN_TOKEN))
            assert created.status_code == 201, created.text
            ready = await answer(api, "/readyz")
            assert ready.status_code == 503, ready.text
            checks = ready.json()["checks"]
            assert checks["postgres"] == "ok" and checks["nats"].startswith("failing")
            assert checks["engine"].startswith("failing")
        stop_within(api, 3.0)
