"""The reference highly available topology on one machine (docs/deploy.md, "High availability"): a
three-server NATS cluster with every stream and consumer at three replicas (nats_cluster.py), Patroni
managing three Postgres servers in strict synchronous mode over etcd (patroni.py), and two of each
scheduler process — APIs, engines, workers — all on loopback, each started and stopped by its PID.

    python -m stack.ha --seconds 600     # prints the APIs and the admin token; ends by itself

Lose any one of its servers and nothing acknowledged is lost: the failover tests strike its parts one
at a time (tests/faults/test_postgres_failover.py, tests/integration/test_nats_cluster.py)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from app.config import Settings
from app.db.migrations import migrate
from app.dev import free_port
from stack.nats_cluster import running_cluster
from stack.patroni import PatroniCluster
from stack.processes import SchedulerProcess
from stack.settings import isolated_settings

ROLES = ("api", "api", "engine", "engine", "worker", "worker")
DATABASE = "scheduler"


@dataclass
class HaStack:
    nats_url: str
    postgres: PatroniCluster
    settings: Settings
    processes: list[SchedulerProcess]

    @property
    def api_urls(self) -> list[str]:
        return [p.base_url for p in self.processes if p.role == "api"]


async def _database(postgres: PatroniCluster) -> str:
    """The database `scheduler`, migrated, behind a URL naming every Postgres server."""
    admin = await asyncpg.connect(postgres.url("postgres"))
    try:
        await admin.execute(f'CREATE DATABASE "{DATABASE}"')
    finally:
        await admin.close()
    url = postgres.url(DATABASE)
    await asyncio.to_thread(migrate, url)
    return url


@contextlib.asynccontextmanager
async def running_ha(
    root: Path, redis_url: str = "redis://127.0.0.1:6379/0", **overrides: object
) -> AsyncIterator[HaStack]:
    """The whole topology, ready (every process answers /readyz); stopped afterwards, processes first.
    `overrides` are settings of the scheduler's processes."""
    (root / "logs").mkdir(parents=True, exist_ok=True)
    postgres = PatroniCluster(3, root=Path(tempfile.mkdtemp(prefix="scheduler-ha-pg-")))
    processes: list[SchedulerProcess] = []
    async with running_cluster(3) as nats:
        try:
            await asyncio.to_thread(postgres.start)
            settings = isolated_settings(
                database_url=await _database(postgres),
                nats_url=nats.url,
                redis_url=redis_url,
                admin_token="adm_" + secrets.token_urlsafe(24),
                prefix="ha",
                stream_replicas=3,
                **overrides,
            )
            for i, role in enumerate(ROLES):
                env = {"SCHEDULER_ENGINE": "off"} if role == "api" else {}
                env["SCHEDULER_OWNER"] = f"{settings.owner}-{role}-{i}"
                p = SchedulerProcess(
                    role, settings, root / "logs", port=free_port(), name=f"{role}-{i}", env=env
                )
                p.start()
                processes.append(p)
            await asyncio.gather(*(p.wait_ready() for p in processes))
            yield HaStack(nats.url, postgres, settings, processes)
        finally:
            for p in processes:
                await asyncio.to_thread(p.stop, 30)
            await asyncio.to_thread(postgres.stop)
            shutil.rmtree(postgres.root, ignore_errors=True)


async def _main(seconds: float) -> None:
    root = Path(tempfile.mkdtemp(prefix="scheduler-ha-"))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    started = time.monotonic()
    async with running_ha(root) as ha:
        print(f"up after {time.monotonic() - started:.1f}s, logs in {root / 'logs'}")
        print(f"APIs          {' '.join(ha.api_urls)}")
        print(f"admin token   {ha.settings.admin_token}")
        print(f"database      {ha.settings.database_url}")
        print(f"NATS          {ha.nats_url}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)
    print("stopped")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m stack.ha", description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=600.0, help="how long it stays up (default 600)")
    asyncio.run(_main(p.parse_args(argv).seconds))


if __name__ == "__main__":
    main()
