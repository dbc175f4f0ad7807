"""The fault harness's own servers: an embedded Postgres (migrated) and NATS it can restart, and the
settings its processes share."""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg

from app.cli import migrate
from app.config import Settings
from app.dev import EmbeddedNats, EmbeddedPostgres
from tests.support import with_database


def stack_settings(database_url: str, nats_url: str) -> Settings:
    """Short leases, so a lost or frozen worker is rescued within seconds."""
    return Settings(
        database_url=database_url,
        nats_url=nats_url,
        admin_token="adm_" + secrets.token_urlsafe(24),
        allow_private_targets=True,  # the receiver is on 127.0.0.1
        lease_seconds=2.0,
        dispatch_lease_seconds=5.0,
        ack_wait_seconds=3.0,
        reap_interval_seconds=0.3,
        poll_interval_seconds=0.2,
        worker_grace_seconds=2.0,
    )


@contextlib.asynccontextmanager
async def embedded(root: Path) -> AsyncIterator[tuple[EmbeddedPostgres, EmbeddedNats, str, str]]:
    """The harness's own Postgres (migrated) and NATS, stopped afterwards."""
    postgres, nats = EmbeddedPostgres(root / "postgres"), EmbeddedNats(root / "nats")
    try:
        admin_url = await asyncio.to_thread(postgres.start)
        nats_url = await asyncio.to_thread(nats.start)
        conn = await asyncpg.connect(admin_url)
        try:
            await conn.execute('CREATE DATABASE "scheduler"')
        finally:
            await conn.close()
        database_url = with_database(admin_url, "scheduler")
        await asyncio.to_thread(migrate, database_url)
        yield postgres, nats, database_url, nats_url
    finally:
        await asyncio.to_thread(nats.stop)
        await asyncio.to_thread(postgres.stop)


def stale_counters(metrics: str) -> dict[str, float]:
    """scheduler_stale_results_total by stage, from a /metrics page."""
    found = dict(re.findall(r'^scheduler_stale_results_total\{stage="(\w+)"\} (\S+)$', metrics, re.MULTILINE))
    return {stage: float(found.get(stage, 0)) for stage in ("start", "finish")}
