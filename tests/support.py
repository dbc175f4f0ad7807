"""Test infrastructure: real Postgres, NATS and Redis — the machine's (SCHEDULER_TEST_* URLs) or
embedded ones from the PyPI wheels — and an isolated database, stream and key prefix per test."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime
from typing import Any

import asyncpg
import httpx
import uvicorn
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError
from starlette.types import ASGIApp

from app.bus.jetstream import delete_streams
from app.bus.message import decode
from app.config import Settings, nats_servers
from app.dev import free_port
from app.services.audit import Actor, AuditContext
from app.telemetry.ops_server import HostedServer
from stack import databases
from stack.databases import with_database
from stack.eventually import eventually
from stack.servers import Services
from stack.settings import isolated_settings, process_env

__all__ = ["Services", "process_env", "with_database"]  # re-exported: the tests' one import

ADMIN_TOKEN = "admin-test-token"
# A service called directly by a test acts as the admin token would (services.audit).
AS_ADMIN = AuditContext(Actor("admin", "admin"), "test")


def start_services() -> Services:
    """The machine's services when SCHEDULER_TEST_* say so, else embedded servers in a temp dir in
    memory (the bench's stay on disk: a figure on tmpfs would flatter the database)."""
    return Services.start("SCHEDULER_TEST_", prefix="scheduler-test-", in_memory=True)


def stop_services(services: Services) -> None:
    services.stop()


_template_days: dict[str, date] = {}  # template -> the UTC day its partitions were premade for


async def create_template(services: Services) -> str:
    """A database migrated once (and given its partitions) that every test database is cloned from."""
    name = await databases.create_template(services.postgres_url, f"scheduler_tpl_{os.getpid()}")
    _template_days[name] = datetime.now(UTC).date()
    return name


async def clone_database(services: Services, template: str) -> str:
    today = datetime.now(UTC).date()
    if _template_days.get(template, today) != today:
        # The suite crossed midnight: premake the template's new day first, or each clone would start
        # a day behind and a test's first maintenance pass would create one day more than it expects.
        await databases.prepare_template(services.postgres_url, template)
        _template_days[template] = today
    return await databases.clone_database(services.postgres_url, template, f"t_{uuid.uuid4().hex[:16]}")


async def drop_database(services: Services, name: str) -> None:
    await databases.drop_database(services.postgres_url, name)


def make_settings(services: Services, database: str, **overrides: object) -> Settings:
    """Settings of one test: its own database, stream and lease owner; short poll and reap intervals."""
    values: dict[str, object] = {"poll_interval_seconds": 0.1, "reap_interval_seconds": 0.5, **overrides}
    return isolated_settings(
        database_url=with_database(services.postgres_url, database),
        nats_url=services.nats_url,
        redis_url=services.redis_url,
        admin_token=ADMIN_TOKEN,
        prefix="test",
        **values,
    )


@contextlib.asynccontextmanager
async def serving(app: ASGIApp, port: int | None = None, **options: Any) -> AsyncIterator[str]:
    """An ASGI app under uvicorn on 127.0.0.1 (on `port`, else a free one), in this event loop;
    yields its base URL."""
    port = port or free_port()
    server = HostedServer(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **options))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task
            raise RuntimeError(f"the server on port {port} did not start")
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def running_api(settings: Settings) -> AsyncIterator[str]:
    """The real app under uvicorn on a free port, in this event loop; yields its base URL."""
    from app.api.server import server_options
    from app.main import create_app

    async with serving(create_app(settings), **server_options(settings)) as base:
        yield base


async def run_reaching(
    api: httpx.AsyncClient, run_id: str, auth: dict[str, str], statuses: set[str], timeout: float = 30
) -> dict[str, Any]:
    """The run, read through the API until its status is one of `statuses`."""

    async def read() -> dict[str, Any]:
        return dict((await api.get(f"/runs/{run_id}", headers=auth)).json())

    return await eventually(
        read, until=lambda run: run["status"] in statuses, timeout=timeout, what=f"run {run_id} in {statuses}"
    )


async def create_tenant(client: httpx.AsyncClient, tenant_id: str) -> dict[str, str]:
    r = await client.post(
        "/tenants", json={"id": tenant_id}, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    assert r.status_code == 201, r.text
    return dict(r.json())


async def published(js: JetStreamContext, stream: str) -> int:
    """How many messages the stream holds."""
    return int((await js.stream_info(stream)).state.messages)


async def published_runs(js: JetStreamContext, stream: str) -> int:
    """How many runs the stream's messages carry (read by sequence: nothing is consumed)."""
    state = (await js.stream_info(stream)).state
    n = 0
    for seq in range(state.first_seq, state.last_seq + 1) if state.messages else ():
        with contextlib.suppress(NotFoundError):  # acked meanwhile
            msg = await js.get_msg(stream, seq)
            n += len(decode(msg.data or b""))
    return n


async def stream_runs(nats_url: str, settings: Settings) -> list[str]:
    """Every run the stream's messages carry, as "<run id>:<epoch>", consumed by an audit consumer
    of its own (the workers' is left as it is)."""
    import nats

    nc = await nats.connect(servers=nats_servers(nats_url))
    try:
        js = nc.jetstream()
        sub = await js.pull_subscribe(f"{settings.subject_prefix}.>", durable="audit", stream=settings.stream)
        runs: list[str] = []
        while True:
            try:
                msgs = await sub.fetch(500, timeout=1)
            except (nats.errors.TimeoutError, TimeoutError):
                return runs
            for m in msgs:
                runs += [run.msg_id for run in decode(m.data)]
                await m.ack()
    finally:
        await nc.close()


async def delete_stream(settings: Settings) -> None:
    import nats

    with contextlib.suppress(Exception):
        nc = await nats.connect(servers=settings.nats_servers)
        try:
            await delete_streams(nc.jetstream(), settings)
        finally:
            await nc.close()


# ───────────────────────────── API test helpers ─────────────────────────────
# Shared by the tests/integration/test_api_*.py suites: an app with settings overrides, bearer
# headers, error-shape assertions and a snapshot of every table to prove "nothing was written".

TABLE_ORDER = {
    "tenants": "id",
    "api_keys": "id",
    "jobs": "tenant_id, name",
    "job_runs": "id",
    "idempotency_keys": "tenant_id, key",
    "run_callbacks": "id",
    "concurrency_slots": "tenant_id, job, key",
    "concurrency_holders": "run_id, job",
    "dedupe_keys": "tenant_id, job, key",
    "run_tags": "tenant_id, tag, scheduled_at, run_id",
    "run_groups": "id",
    "audit_events": "tenant_id, at, id",
}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@contextlib.asynccontextmanager
async def api_client(settings: Settings, **overrides: object) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the real app (engine off) built with these settings overrides."""
    async with (
        running_api(settings.model_copy(update={"engine": "off", **overrides})) as base,
        httpx.AsyncClient(base_url=base, timeout=30) as client,
    ):
        yield client


async def snapshot(pool: asyncpg.Pool) -> dict[str, list[dict[str, object]]]:
    """Every row of every table the API writes, in a stable order."""
    async with pool.acquire() as conn:
        return {
            table: [dict(r) for r in await conn.fetch(f"SELECT * FROM {table} ORDER BY {order}")]
            for table, order in TABLE_ORDER.items()
        }


async def count_rows(pool: asyncpg.Pool, table: str) -> int:
    assert table in TABLE_ORDER
    return int(await pool.fetchval(f"SELECT count(*) FROM {table}"))


def assert_error(
    response: httpx.Response, status: int, code: str, field: str | None = None
) -> dict[str, object]:
    """The API's error shape, RFC 9457 problem details: application/problem+json with type, title,
    status and detail, and our extension members code (stable) and field (the input at fault)."""
    assert response.status_code == status, f"{response.status_code} {response.text}"
    assert response.headers["content-type"] == "application/problem+json", response.headers
    body = dict(response.json())
    assert body["type"] == "about:blank", body
    assert body["status"] == status, body
    assert isinstance(body["title"], str) and body["title"], body
    assert body["code"] == code, body
    assert isinstance(body["detail"], str) and body["detail"], body
    assert set(body) <= {"type", "title", "status", "detail", "code", "field"}, body
    if field is not None:
        assert body.get("field") == field, body
    return body


async def put_job(
    client: httpx.AsyncClient, tenant_id: str, name: str, auth: dict[str, str], **fields: object
) -> dict[str, object]:
    fields.setdefault("target", {"type": "noop"})
    r = await client.put(f"/tenants/{tenant_id}/jobs/{name}", json=fields, headers=auth)
    assert r.status_code in (200, 201), r.text
    return dict(r.json())


async def submit_run(
    client: httpx.AsyncClient, tenant_id: str, auth: dict[str, str], **body: object
) -> dict[str, object]:
    r = await client.post(f"/tenants/{tenant_id}/runs", json=body, headers=auth)
    assert r.status_code == 201, r.text
    return dict(r.json())
