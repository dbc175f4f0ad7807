"""pgqueuer consumers for `bench peers`: `python -m bench.peers.pgqueuer_consumer DSN --consumers C
--batch-size B`. C QueueManagers in one process, each on an asyncpg connection of its own, dequeuing
B jobs at a time (pgqueuer's defaults: one manager, batches of 10), with a no-op entrypoint `noop`."""

from __future__ import annotations

import argparse
import asyncio
import signal

import asyncpg
from pgqueuer import AsyncpgDriver, Job, Queries, QueueManager


async def install(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await Queries(AsyncpgDriver(conn)).install()
    finally:
        await conn.close()


async def enqueue(dsn: str, n: int) -> None:
    """N jobs in one transaction (pgqueuer's batch enqueue), as our backlog is one commit, its table
    analyzed in it so the jobs become visible with fresh statistics, as ours do (bench/endtoend.py)."""
    conn = await asyncpg.connect(dsn)
    try:
        queries = Queries(AsyncpgDriver(conn))
        async with conn.transaction():
            await queries.enqueue(["noop"] * n, [None] * n, [0] * n)
            await conn.execute(f"ANALYZE {queries.qbe.settings.queue_table}")
    finally:
        await conn.close()


async def consume(dsn: str, consumers: int, batch_size: int) -> None:
    managers = []
    for _ in range(consumers):
        qm = QueueManager(Queries(AsyncpgDriver(await asyncpg.connect(dsn))))

        @qm.entrypoint("noop")
        async def noop(job: Job) -> None:
            return None

        managers.append(qm)
    loop = asyncio.get_running_loop()

    def shut_down() -> None:
        for qm in managers:
            qm.shutdown.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, shut_down)
    tasks = [asyncio.create_task(qm.run(batch_size=batch_size)) for qm in managers]
    await asyncio.sleep(1.0)  # each manager is LISTENing by now
    print("ready", flush=True)
    await asyncio.gather(*tasks)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("dsn")
    p.add_argument("--consumers", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=100)
    args = p.parse_args()
    asyncio.run(consume(args.dsn, args.consumers, args.batch_size))


if __name__ == "__main__":
    main()
