"""A procrastinate worker for `bench peers`: `python -m bench.peers.procrastinate_worker DSN`, with
procrastinate's default settings (one worker, concurrency 1, LISTEN/NOTIFY on) and a no-op task."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal

import procrastinate
from procrastinate import schema


def make_app(dsn: str) -> procrastinate.App:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="noop")
    async def noop() -> None:
        return None

    return app


async def install(dsn: str) -> None:
    app = make_app(dsn)
    async with app.open_async():
        await schema.SchemaManager(app.connector).apply_schema_async()


async def enqueue(dsn: str, n: int, chunk: int = 10_000) -> None:
    """N jobs by procrastinate's batch defer (one statement per chunk)."""
    app = make_app(dsn)
    async with app.open_async():
        task = app.tasks["noop"]
        for i in range(0, n, chunk):
            await task.batch_defer_async(*({} for _ in range(min(chunk, n - i))))


async def work(dsn: str) -> None:
    app = make_app(dsn)
    async with app.open_async():
        worker = asyncio.create_task(app.run_worker_async())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, worker.cancel)
        await asyncio.sleep(1.0)  # the worker is LISTENing by now
        print("ready", flush=True)
        with contextlib.suppress(asyncio.CancelledError):
            await worker


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("dsn")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(work(args.dsn))


if __name__ == "__main__":
    main()
