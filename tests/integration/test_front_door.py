"""The front door of a real `scheduler api` process against slow and half-sent requests (issue 29,
item 4): a request's head must arrive in time and its body at a minimum rate, connections are
bounded in all and per client address, and a well-behaved tenant beside them is served again
once they are gone. Hostile connections come from other loopback addresses (127.0.0.2, …), the
well-behaved client from 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from app.config import Settings
from tests.processes import Process, processes
from tests.support import ADMIN_TOKEN, bearer


@contextlib.asynccontextmanager
async def api_process(settings: Settings, tmp_path: Path, **env: str) -> AsyncIterator[Process]:
    async with processes(settings, tmp_path) as spawn:
        api = spawn("api", SCHEDULER_ENGINE="off", **env)
        await api.wait_ready()
        yield api


async def tenant_client(api: Process, tenant_id: str) -> tuple[httpx.AsyncClient, dict[str, str]]:
    client = httpx.AsyncClient(base_url=api.base_url, timeout=10)
    r = await client.post("/tenants", json={"id": tenant_id}, headers=bearer(ADMIN_TOKEN))
    assert r.status_code == 201, r.text
    auth = bearer(r.json()["api_key"])
    r = await client.put(f"/tenants/{tenant_id}/jobs/hello", json={"target": {"type": "noop"}}, headers=auth)
    assert r.status_code == 201, r.text
    return client, auth


async def connect(port: int, source: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))


async def held_open(
    port: int, source: str, first: bytes, drip: bytes, every: float, limit: float
) -> tuple[float, bytes]:
    """A connection that sends `first`, then `drip` every `every` seconds, until the server closes
    it (or `limit`); returns how long it stayed open and what the server answered."""
    started = time.monotonic()
    reader, writer = await connect(port, source)
    answer = b""

    async def dripping() -> None:
        if first:
            writer.write(first)
        while True:
            await asyncio.sleep(every)
            if drip:
                writer.write(drip)

    sender = asyncio.create_task(dripping())
    try:
        async with asyncio.timeout(limit):
            while chunk := await reader.read(65536):
                answer += chunk
    except (TimeoutError, ConnectionError):
        pass
    finally:
        sender.cancel()
        writer.close()
    return time.monotonic() - started, answer


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


HALF_SENT = b"POST /tenants/good/runs HTTP/1.1\r\nHost: x\r\nContent-Type: applic"


async def test_slow_and_half_sent_requests_are_cut_while_a_tenant_is_served(
    settings: Settings, tmp_path: Path
) -> None:
    """A byte every half second of a head, nothing at all, or a body far below the minimum rate:
    each connection is closed in its allowance. uvicorn alone kept every one of them open."""
    async with api_process(
        settings,
        tmp_path,
        SCHEDULER_HTTP_HEAD_TIMEOUT_SECONDS="1.5",
        SCHEDULER_HTTP_BODY_TIMEOUT_SECONDS="1.5",
        SCHEDULER_HTTP_BODY_MIN_RATE="1000",
    ) as api:
        client, auth = await tenant_client(api, "good")
        body_head = (
            b"POST /tenants/good/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000\r\n\r\n{"
        )
        slow = (
            [held_open(api.port, "127.0.0.2", HALF_SENT, b"x", 0.5, 8) for _ in range(100)]
            + [held_open(api.port, "127.0.0.2", b"", b"", 1, 8) for _ in range(100)]
            + [held_open(api.port, "127.0.0.3", body_head, b" ", 0.5, 8) for _ in range(20)]
        )
        hostile = asyncio.gather(*slow)
        took: list[float] = []
        while not hostile.done():
            started = time.perf_counter()
            r = await client.post("/tenants/good/runs", json={"job": "hello"}, headers=auth)
            assert r.status_code == 201, r.text
            assert (await client.get("/healthz")).status_code == 200
            took.append(time.perf_counter() - started)
            await asyncio.sleep(0.1)
        held = await hostile
        heads, idle, bodies = held[:100], held[100:200], held[200:]
        # Closed at the head timeout (1.5 s) with a 408; the body after 1.5 s plus its few bytes' worth.
        assert all(t < 3 and status_of(a) == 408 for t, a in heads), sorted(heads)[-3:]
        assert all(t < 3 for t, _ in idle), sorted(idle)[-3:]
        assert all(t < 4 for t, _ in bodies), sorted(bodies)[-3:]
        assert max(took) < 1.0, sorted(took)[-3:]
        await client.aclose()


async def test_past_the_connection_limits_requests_are_refused_but_probes_answer(
    settings: Settings, tmp_path: Path
) -> None:
    """From 40 connections a request is answered 503, /healthz still 200; beyond 80 a connection is
    answered 503 at once, unread; beyond 30 of one address likewise. Once the half-sent requests
    are cut by the head timeout, the well-behaved tenant's submission succeeds."""
    async with api_process(
        settings,
        tmp_path,
        SCHEDULER_HTTP_HEAD_TIMEOUT_SECONDS="3",
        SCHEDULER_HTTP_MAX_CONNECTIONS="40",
        SCHEDULER_HTTP_MAX_CONNECTIONS_PER_CLIENT="30",
    ) as api:
        client, auth = await tenant_client(api, "good")
        # One address alone: 30 held, the next 10 turned away at once.
        one = await asyncio.gather(
            *(held_open(api.port, "127.0.0.2", HALF_SENT, b"", 1, 1.0) for _ in range(40))
        )
        turned_away = [a for _, a in one if status_of(a) == 503]
        assert len(turned_away) == 10, [status_of(a) for _, a in one]
        # Many addresses: 60 half-sent requests, past the concurrency limit.
        sources = [f"127.0.0.{3 + i // 20}" for i in range(100)]
        waves = [
            asyncio.create_task(held_open(api.port, source, HALF_SENT, b"", 1, 6)) for source in sources[:60]
        ]
        await asyncio.sleep(0.5)
        r = await client.post("/tenants/good/runs", json={"job": "hello"}, headers=auth)
        assert r.status_code == 503, r.text
        assert (await client.get("/healthz")).status_code == 200
        # 40 more: beyond twice the limit, answered 503 before anything is read.
        more = await asyncio.gather(
            *(held_open(api.port, source, b"", b"", 1, 1.0) for source in sources[60:])
        )
        assert sum(status_of(a) == 503 for _, a in more) >= 15, [status_of(a) for _, a in more]
        held = await asyncio.gather(*waves)
        assert all(t < 5 for t, _ in held), sorted(held)[-3:]  # cut by the head timeout
        r = await client.post("/tenants/good/runs", json={"job": "hello"}, headers=auth)
        assert r.status_code == 201, r.text
        await client.aclose()
