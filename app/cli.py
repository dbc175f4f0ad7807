"""`scheduler` console script: dev | api | engine | worker | migrate | bench."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable

from app import aio
from app.config import Settings, get_settings
from app.db.migrations import alembic_config, migrate

__all__ = ["alembic_config", "main", "migrate"]

log = logging.getLogger("scheduler")


def _setup_logging(settings: Settings) -> None:
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


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
    opens first; Postgres and NATS are reached in the background (app.startup) while /readyz says
    503, and SIGTERM ends the wait."""
    from app.bus.hot_index import HotIndex
    from app.startup import Dependencies
    from app.telemetry import metrics
    from app.telemetry.ops_server import ops_app, serve
    from app.telemetry.tracing import setup_tracing

    assert settings.database_url and settings.nats_url
    setup_tracing(f"scheduler-{role}")
    if role == "engine":
        metrics.expose_engine_metrics()
    else:
        metrics.expose_worker_metrics(settings.worker_concurrency)
    deps = Dependencies(settings.database_url, settings.nats_url, f"scheduler-{role}")
    ops = asyncio.create_task(serve(ops_app(deps.checks()), settings.host, settings.metrics_port, stop))
    hot_index = None
    try:
        if not await deps.connect(stop):
            return
        assert deps.pool is not None and deps.nc is not None
        if settings.hot_index == "redis" and settings.redis_url:
            hot_index = HotIndex(settings.redis_url, f"{settings.stream}:due")
        if role == "engine":
            from app.engine.supervisor import Engine

            await Engine(settings, deps.pool, deps.nc, hot_index).run(stop)
        else:
            from app.worker.consumer import Worker

            await Worker(settings, deps.pool, deps.nc, hot_index).run(stop)
    finally:
        stop.set()
        await ops
        if hot_index is not None:
            await hot_index.close()
        await deps.close()


def cmd_api(settings: Settings, args: argparse.Namespace) -> None:
    import uvicorn

    from app.api.server import server_options
    from app.main import create_app

    _require(settings, "database_url", *(("nats_url",) if settings.engine == "on" else ()))
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
    _require(settings, "database_url")
    assert settings.database_url
    migrate(settings.database_url)
    print("migrated to head")


def cmd_dev(settings: Settings, args: argparse.Namespace) -> None:
    from app.devstack import run_dev

    run_dev(settings, host=args.host, port=args.port)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="scheduler", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("dev", "everything in one command, with embedded Postgres and NATS"),
        ("api", "the HTTP API (its lifespan runs an engine unless SCHEDULER_ENGINE=off)"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--host", default=None)
        p.add_argument("--port", type=int, default=None)
    sub.add_parser("engine", help="claim loop, reaper, cron materializer, partition maintenance")
    sub.add_parser("worker", help="JetStream consumer that executes runs")
    sub.add_parser("migrate", help="alembic upgrade head")
    bench = sub.add_parser("bench", help="the measuring instrument (see docs/bench.md)", add_help=False)
    bench.add_argument("rest", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)

    if args.command == "bench":
        from bench.__main__ import main as bench_main

        bench_main(args.rest)
        return
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
