"""The Python peers' drivers and what every driver is: its install, its consumer's command line, its
enqueue (returning once the N jobs are committed, visible at once) and its count of jobs not yet
done. bench.peers.node has the Node ones, bench.peers.sides the drain they all go through."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
from dataclasses import dataclass

import asyncpg

from bench import pgstats
from bench.measure import rate


@dataclass
class Side:
    name: str
    wall: float
    cpu: dict[str, float]
    postgres: pgstats.Work

    def per_second(self, n: int) -> float:
        return rate(n, self.wall)


async def count(url: str, sql: str) -> int:
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
        return await count(url, "SELECT count(*) FROM pgqueuer")  # a finished job is deleted


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
        return n - await count(url, sql)


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
