"""The drain every peer of `bench peers` goes through: a fresh database (Celery: a fresh embedded
Redis as its broker), the consumer started and ready, then the jobs, timed until the driver's count
says every job is done."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

from app.dev import EmbeddedRedis
from bench import pgstats
from bench.measure import cpu_seconds, descendants, wait_for_count
from bench.peers.drivers import Celery, Driver, PgQueuer, Procrastinate, Side
from bench.peers.node import GraphileDefaults, GraphileFast, PgBoss
from bench.stack import Bench
from stack import databases
from stack.databases import with_database

__all__ = ["DRIVERS", "Driver", "Side", "drain"]

DRIVERS: dict[str, type[Driver]] = {
    d.name: d for d in (PgQueuer, Procrastinate, GraphileFast, GraphileDefaults, PgBoss, Celery)
}


async def drain(bench: Bench, driver: Driver, n: int, poll: float, timeout: float) -> Side:
    """One peer's drain: fresh database (and broker), its schema, its consumer ready, then the jobs."""
    admin = bench.services.postgres_url
    db = await databases.create_database(admin, f"bench_{os.getpid()}_{driver.name.replace('-', '_')}")
    url = with_database(admin, db)
    redis = (
        EmbeddedRedis(Path(tempfile.mkdtemp(dir=bench.services.root))) if driver.broker == "redis" else None
    )
    broker = await asyncio.to_thread(redis.start) if redis is not None else url
    log = (bench.logs / f"peer-{driver.name}.log").open("a")
    proc: asyncio.subprocess.Process | None = None
    try:
        await driver.install(broker)
        proc = await asyncio.create_subprocess_exec(
            *driver.command(broker), stdout=asyncio.subprocess.PIPE, stderr=log
        )
        assert proc.stdout is not None
        for _ in range(20):  # Celery prints a blank line of its banner first
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            if line.strip() == b"ready" or not line:
                break
        if line.strip() != b"ready":
            raise RuntimeError(f"{driver.name} consumer did not start (see {log.name})")
        await asyncio.sleep(0.5)  # a pool's processes and connections are up
        pids = {driver.name: proc.pid} | {f"{driver.name}/{p}": p for p in descendants(proc.pid)}
        if redis is not None and redis.proc is not None:
            pids["redis-server"] = redis.proc.pid
        before = await pgstats.snapshot(url)
        cpu_before = cpu_seconds(pids)
        await driver.enqueue(broker, n)
        start = time.perf_counter()

        async def done() -> int:
            return n - await driver.remaining(broker, n)

        finished = await wait_for_count(done, n, desc=driver.name, interval=poll, timeout=timeout)
        cpu_after = cpu_seconds(pids)
        await driver.settle()
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 15)
        after = await pgstats.snapshot(url)
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        log.close()
        if redis is not None:
            await asyncio.to_thread(redis.stop)
        await databases.drop_database(admin, db)
    cpu: dict[str, float] = {}
    for k in cpu_after:  # a consumer's child processes (Celery's pool) count as the consumer's
        label = k.split("/")[0]
        cpu[label] = cpu.get(label, 0.0) + cpu_after[k] - cpu_before[k]
    return Side(driver.name, finished - start, cpu, pgstats.work(before, after, n))
