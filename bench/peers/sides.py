"""The peers of `bench peers`, each a driver: its install, its consumer's command line, its enqueue
(returning once the N jobs are committed, visible at once) and its count of jobs not yet done; and
the one drain they all go through: a fresh database (Celery: a fresh embedded Redis as its broker),
the consumer started and ready, then the jobs, timed until the count says every job is done."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from app.dev import EmbeddedRedis
from bench import pgstats
from bench.measure import cpu_seconds, descendants, rate, wait_for_count
from bench.peers import node
from bench.stack import Bench
from stack import databases
from stack.databases import with_database


@dataclass
class Side:
    name: str
    wall: float
    cpu: dict[str, float]
    postgres: pgstats.Work

    def per_second(self, n: int) -> float:
        return rate(n, self.wall)


async def _count(url: str, sql: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval(sql))
    finally:
        await conn.close()


class Driver:
    name = ""
    broker = "postgres"
    package = ""

    def __init__(self, args: argparse.Namespace):
        self.args = args

    def unavailable(self) -> str | None:
        if self.package and importlib.util.find_spec(self.package) is None:
            return f"needs {self.package}: pip install -e '.[peers]'"
        return None

    def describe(self) -> str:
        raise NotImplementedError

    async def install(self, url: str) -> None:
        raise NotImplementedError

    def command(self, url: str) -> list[str]:
        raise NotImplementedError

    async def enqueue(self, url: str, n: int) -> None:
        raise NotImplementedError

    async def remaining(self, url: str, n: int) -> int:
        raise NotImplementedError

    async def settle(self) -> None:
        """Wait for whatever the enqueue left running."""


def _version(package: str) -> str:
    from importlib.metadata import version

    return f"{package} {version(package)}"


class PgQueuer(Driver):
    name = package = "pgqueuer"

    def describe(self) -> str:
        a = self.args
        return (
            f"{_version('pgqueuer')}: {a.pgqueuer_consumers} consumers (QueueManager, one connection each) "
            f"in one process, batch_size {a.pgqueuer_batch_size}"
        )

    async def install(self, url: str) -> None:
        from bench.peers import pgqueuer_consumer

        await pgqueuer_consumer.install(url)

    def command(self, url: str) -> list[str]:
        a = self.args
        return [
            *(sys.executable, "-m", "bench.peers.pgqueuer_consumer", url),
            *("--consumers", str(a.pgqueuer_consumers), "--batch-size", str(a.pgqueuer_batch_size)),
        ]

    async def enqueue(self, url: str, n: int) -> None:
        from bench.peers import pgqueuer_consumer

        await pgqueuer_consumer.enqueue(url, n)

    async def remaining(self, url: str, n: int) -> int:
        return await _count(url, "SELECT count(*) FROM pgqueuer")  # a finished job is deleted


class Procrastinate(Driver):
    name = package = "procrastinate"

    def describe(self) -> str:
        return f"{_version('procrastinate')}: one worker, its defaults (concurrency 1)"

    async def install(self, url: str) -> None:
        from bench.peers import procrastinate_worker

        await procrastinate_worker.install(url)

    def command(self, url: str) -> list[str]:
        return [sys.executable, "-m", "bench.peers.procrastinate_worker", url]

    async def enqueue(self, url: str, n: int) -> None:
        from bench.peers import procrastinate_worker

        await procrastinate_worker.enqueue(url, n)

    async def remaining(self, url: str, n: int) -> int:
        sql = "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
        return n - await _count(url, sql)


class NodePeer(Driver):
    """A script of bench/peers_node: `node SCRIPT install|enqueue|work DSN …` (see the scripts)."""

    script = ""
    npm_package = ""
    directory: Path | None = None
    why: str = ""
    _enqueuer: asyncio.subprocess.Process

    def unavailable(self) -> str | None:
        if NodePeer.directory is None and not NodePeer.why:
            NodePeer.directory, NodePeer.why = node.ensure()
            print(f"peers: {NodePeer.why}", flush=True)
        return None if NodePeer.directory is not None else NodePeer.why

    def _argv(self, *args: str) -> list[str]:
        assert NodePeer.directory is not None
        return ["node", str(NodePeer.directory / self.script), *args]

    def version(self) -> str:
        assert NodePeer.directory is not None
        return f"{self.npm_package} {node.version(NodePeer.directory, self.npm_package)}"

    async def install(self, url: str) -> None:
        proc = await asyncio.create_subprocess_exec(
            *self._argv("install", url), stdout=asyncio.subprocess.DEVNULL
        )
        if await proc.wait() != 0:
            raise RuntimeError(f"{self.name}: install failed")

    async def enqueue(self, url: str, n: int) -> None:
        proc = await asyncio.create_subprocess_exec(
            *self._argv("enqueue", url, str(n)), stdout=asyncio.subprocess.PIPE
        )
        assert proc.stdout is not None
        line = await proc.stdout.readline()
        if line.strip() != b"committed":
            raise RuntimeError(f"{self.name}: enqueue failed")
        self._enqueuer = proc  # it closes its pool and exits by itself

    async def settle(self) -> None:
        await asyncio.wait_for(self._enqueuer.wait(), 30)


class GraphileWorker(NodePeer):
    script, npm_package = "graphile.mjs", "graphile-worker"
    preset = ""

    def describe(self) -> str:
        if self.preset == "fast":
            return (
                f"{self.version()}: its performance page's preset (concurrentJobs 24, maxPoolSize 25, "
                "localQueue size 500, completeJobBatchDelay 0, failJobBatchDelay 0), one process"
            )
        return f"{self.version()}: its defaults (concurrency 1), one process"

    def command(self, url: str) -> list[str]:
        return self._argv("work", url, self.preset)

    async def remaining(self, url: str, n: int) -> int:
        return await _count(url, "SELECT count(*) FROM graphile_worker._private_jobs")  # deleted when done


class GraphileFast(GraphileWorker):
    name, preset = "graphile-fast", "fast"


class GraphileDefaults(GraphileWorker):
    name, preset = "graphile-defaults", "defaults"


class PgBoss(NodePeer):
    name, script, npm_package = "pgboss", "pgboss.mjs", "pg-boss"

    def describe(self) -> str:
        a = self.args
        return (
            f"{self.version()}: {a.pgboss_workers} loops in one process, each fetch() of up to "
            f"{a.pgboss_batch} jobs then one complete() of them all (its batch API)"
        )

    def command(self, url: str) -> list[str]:
        return self._argv("work", url, str(self.args.pgboss_workers), str(self.args.pgboss_batch))

    async def remaining(self, url: str, n: int) -> int:
        sql = "SELECT count(*) FROM pgboss.job WHERE name = 'noop' AND state = 'completed'"
        return n - await _count(url, sql)


class Celery(Driver):
    name = package = "celery"
    broker = "redis"

    def describe(self) -> str:
        a = self.args
        return (
            f"{_version('celery')}: one worker, pool {a.celery_pool} x {a.celery_concurrency}, prefetch "
            f"multiplier {a.celery_prefetch}, acks_late, no result backend; broker: a fresh embedded Redis"
        )

    async def install(self, url: str) -> None:
        return None

    def command(self, url: str) -> list[str]:
        a = self.args
        return [
            *(sys.executable, "-m", "bench.peers.celery_worker", url, "--pool", a.celery_pool),
            *("--concurrency", str(a.celery_concurrency), "--prefetch", str(a.celery_prefetch)),
        ]

    async def enqueue(self, url: str, n: int) -> None:
        from bench.peers import celery_worker

        await asyncio.to_thread(celery_worker.enqueue, url, n)

    async def remaining(self, url: str, n: int) -> int:
        from bench.peers import celery_worker

        return await asyncio.to_thread(celery_worker.remaining, url)


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
