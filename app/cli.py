"""`scheduler` console script: dev | api | engine | worker | migrate | bench."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from importlib.metadata import entry_points

from app import aio
from app.config import Settings, get_settings

__all__ = ["main"]

log = logging.getLogger("scheduler")


def _setup_logging(settings: Settings) -> None:
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # One line per attempt is for `scheduler dev` (which turns it up), not for a production log.
    logging.getLogger("app.worker.outcomes").setLevel(logging.WARNING)


def _require(settings: Settings, *names: str) -> None:
    missing = [n for n in names if not getattr(settings, n)]
    if missing:
        env = ", ".join(f"SCHEDULER_{n.upper()}" for n in missing)
        raise SystemExit(f"scheduler: {env} must be set (or run `scheduler dev` for an embedded stack)")


def _run_until_signal(main: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await main(stop)

    aio.run(runner)


async def _process(settings: Settings, role: str, stop: asyncio.Event) -> None:
    """`scheduler engine` / `scheduler worker`: the role's loop plus its ops server. The ops port
    opens first; Postgres and NATS are reached in the background (app.runtime) while /readyz says
    503, and SIGTERM ends the wait."""
    from app.runtime import Runtime
    from app.telemetry import metrics
    from app.telemetry.ops_server import ops_app, serve
    from app.telemetry.tracing import setup_tracing

    setup_tracing(f"scheduler-{role}")
    if role == "engine":
        metrics.expose_engine_metrics()
    else:
        metrics.expose_worker_metrics(settings.worker_concurrency)
    runtime = Runtime(settings, f"scheduler-{role}")
    ops = asyncio.create_task(serve(ops_app(runtime.checks()), settings.host, settings.metrics_port, stop))
    try:
        if not await runtime.connect(stop):
            return
        assert runtime.pool is not None and runtime.nc is not None
        if role == "engine":
            from app.engine.engine import Engine

            await Engine(settings, runtime.pool, runtime.nc, runtime.hot_index).run(stop)
        else:
            from app.worker.consumer import Worker

            await Worker(settings, runtime.pool, runtime.nc).run(stop)
    finally:
        stop.set()
        await ops
        await runtime.close()


def cmd_api(settings: Settings, args: argparse.Namespace) -> None:
    import uvicorn

    from app.api.server import server_options
    from app.main import create_app

    _require(settings, "database_url", *(("nats_url",) if settings.engine == "on" else ()))
    aio.tune_gc()
    # With several workers, each process imports the app itself and reads the same environment.
    uvicorn.run(
        create_app(settings) if settings.api_workers == 1 else "app.main:create_app",
        factory=settings.api_workers > 1,
        workers=settings.api_workers,
        host=args.host or settings.host,
        port=args.port or settings.port,
        log_level=settings.log_level.lower(),
        access_log=False,
        **server_options(settings),  # a bounded request head (431 past it)
    )


def cmd_role(settings: Settings, role: str) -> None:
    _require(settings, "database_url", "nats_url")
    _run_until_signal(lambda stop: _process(settings, role, stop))


def cmd_migrate(settings: Settings, _: argparse.Namespace) -> None:
    from app.db.migrations import migrate  # alembic: a second of imports no other command needs

    _require(settings, "database_url")
    assert settings.database_url
    migrate(settings.database_url)
    print("migrated to head")


def cmd_dev(settings: Settings, args: argparse.Namespace) -> None:
    from app.devstack import run_dev

    run_dev(settings, host=args.host, port=args.port)


# What each command reads, for its --help. Every variable is in docs/configuration.md.
_CONNECT = "SCHEDULER_DATABASE_URL, SCHEDULER_NATS_URL (required)"
_ENGINE_VARS = (
    "SCHEDULER_OWNER, SCHEDULER_BATCH_SIZE, SCHEDULER_PER_TENANT_CAP, SCHEDULER_DISPATCH_LEASE_SECONDS, "
    "SCHEDULER_LEASE_SECONDS, SCHEDULER_POLL_INTERVAL_SECONDS, SCHEDULER_MAX_QUEUED_MESSAGES, "
    "SCHEDULER_HOT_INDEX, SCHEDULER_REDIS_URL, SCHEDULER_RETENTION_DAYS, SCHEDULER_AUDIT_RETENTION_DAYS, "
    "SCHEDULER_PREMAKE_DAYS, "
    "SCHEDULER_ANALYZE_INTERVAL_SECONDS, SCHEDULER_ANALYZE_AFTER_CHANGES, SCHEDULER_CRON_HORIZON_SECONDS, "
    "SCHEDULER_CRON_CATCHUP_SECONDS, SCHEDULER_STREAM, SCHEDULER_SUBJECT_PREFIX"
)
_API_VARS = (
    "SCHEDULER_ADMIN_TOKEN, SCHEDULER_HOST, SCHEDULER_PORT, SCHEDULER_ENGINE, SCHEDULER_API_WORKERS, "
    "SCHEDULER_TENANT_MAX_PENDING, SCHEDULER_MAX_PAYLOAD_BYTES, SCHEDULER_MAX_REQUEST_BYTES, "
    "SCHEDULER_MAX_BATCH, SCHEDULER_MAX_SCHEDULE_AHEAD_DAYS, SCHEDULER_ALLOW_PRIVATE_TARGETS, "
    "SCHEDULER_HTTP_HEAD_TIMEOUT_SECONDS, SCHEDULER_HTTP_BODY_TIMEOUT_SECONDS, SCHEDULER_HTTP_BODY_MIN_RATE, "
    "SCHEDULER_HTTP_MAX_CONNECTIONS, SCHEDULER_HTTP_MAX_CONNECTIONS_PER_CLIENT, SCHEDULER_PUBLIC_URL, "
    "SCHEDULER_FORWARDED_ALLOW_IPS"
)
_WORKER_VARS = (
    "SCHEDULER_WORKER_CONCURRENCY, SCHEDULER_WORKER_GRACE_SECONDS, SCHEDULER_ALLOW_PRIVATE_TARGETS, "
    "SCHEDULER_STREAM, SCHEDULER_SUBJECT_PREFIX, SCHEDULER_CONSUMER, SCHEDULER_ACK_WAIT_SECONDS, "
    "SCHEDULER_HOT_INDEX, SCHEDULER_REDIS_URL"
)
_OPS = "SCHEDULER_METRICS_PORT (/metrics, /healthz, /readyz), SCHEDULER_LOG_LEVEL"

COMMANDS: dict[str, tuple[str, str, str]] = {
    # name: (one line for `scheduler --help`, what it does, the SCHEDULER_* variables it reads)
    "dev": (
        "everything in one process, with embedded Postgres and NATS",
        "Migrates, then runs the API with its engine and a worker in one process, with a demo tenant "
        "and a local echo receiver (/dev/echo) to point jobs at. Postgres and NATS (and Redis when "
        "SCHEDULER_HOT_INDEX=redis) are embedded servers from the wheels unless their URLs are set. "
        "Data, the admin token and the demo key live in SCHEDULER_DATA_DIR (.scheduler-dev); one "
        "`scheduler dev` per data dir. Ctrl-C stops everything it started.",
        "SCHEDULER_DATA_DIR, SCHEDULER_DATABASE_URL, SCHEDULER_NATS_URL, SCHEDULER_REDIS_URL "
        "(each unset: embedded), SCHEDULER_ADMIN_TOKEN (unset: made once, kept in the data dir), "
        "SCHEDULER_HOST, SCHEDULER_PORT, SCHEDULER_LOG_LEVEL, SCHEDULER_ALLOW_PRIVATE_TARGETS (on in dev), "
        "and everything `api` and `worker` read",
    ),
    "api": (
        "the HTTP API (its lifespan runs an engine unless SCHEDULER_ENGINE=off)",
        "Serves the HTTP API (OpenAPI at /docs, metrics at /metrics). Unless SCHEDULER_ENGINE=off, "
        "each API process also runs an engine. Does not migrate: run `scheduler migrate` first.",
        f"{_CONNECT}; {_API_VARS}; SCHEDULER_LOG_LEVEL; with the engine on, also {_ENGINE_VARS}",
    ),
    "engine": (
        "claim loop, reaper, cron materializer, partition maintenance",
        "Claims due runs and publishes them to JetStream; reaps lapsed leases; materializes cron "
        "occurrences; creates and drops daily partitions. Any number of engines may run.",
        f"{_CONNECT}; {_ENGINE_VARS}; {_OPS}",
    ),
    "worker": (
        "JetStream consumer that executes runs",
        "Pulls runs from JetStream, starts each under its epoch fence, calls its target (webhook, "
        "registered Python handler or noop) and records the outcome. On SIGTERM, in-flight runs get "
        "SCHEDULER_WORKER_GRACE_SECONDS to finish.",
        f"{_CONNECT}; {_WORKER_VARS}; {_OPS}",
    ),
    "migrate": (
        "alembic upgrade head",
        "Upgrades the database schema to the newest migration (alembic upgrade head). Run it once "
        "per deploy, before the new API, engines and workers start.",
        "SCHEDULER_DATABASE_URL (required), SCHEDULER_LOG_LEVEL",
    ),
    "bench": (
        "the measuring instrument (see docs/bench.md; `scheduler bench --help`)",
        "",
        "",
    ),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scheduler",
        description="A multi-tenant job scheduler. `scheduler COMMAND --help` says what a command "
        "does and which SCHEDULER_* environment variables it reads.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (summary, what, reads) in COMMANDS.items():
        if name == "bench":  # its own parser (bench/__main__.py); main() hands it the arguments
            sub.add_parser(name, help=summary, add_help=False)
            continue
        p = sub.add_parser(name, help=summary, description=what, epilog=f"Reads: {reads}.")
        if name in ("dev", "api"):
            p.add_argument("--host", default=None, help="bind address (default: SCHEDULER_HOST)")
            p.add_argument("--port", type=int, default=None, help="port (default: SCHEDULER_PORT)")
    return parser


def _bench() -> Callable[..., None]:
    found = entry_points(group="scheduler.commands", name="bench")
    if not found:
        raise SystemExit(
            "scheduler: the bench is not installed here (it lives in a source checkout: pip install -e .)"
        )
    command: Callable[..., None] = next(iter(found)).load()
    return command


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        # Everything after `bench` is the bench's, --help included. The bench is found by its entry
        # point, not imported: it builds on app, app does not build on it (and the image has none).
        _bench()(argv[1:], prog="scheduler bench")
        return
    args = _parser().parse_args(argv)
    settings = get_settings()
    _setup_logging(settings)
    if args.command == "api":
        cmd_api(settings, args)
    elif args.command == "migrate":
        cmd_migrate(settings, args)
    elif args.command == "dev":
        cmd_dev(settings, args)
    else:
        cmd_role(settings, args.command)


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
