"""The cron materializer's statements: lock the jobs due within the horizon, insert their
occurrences as runs, move their next fire."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from app.db import queries as q


async def lock_due_cron_jobs(
    conn: asyncpg.Connection, horizon_seconds: float, limit: int
) -> list[asyncpg.Record]:
    return await q.fetch(conn, "lock_due_cron_jobs", horizon_seconds=horizon_seconds, limit=limit)


async def insert_cron_runs(
    conn: asyncpg.Connection, tenant_id: str, name: str, occurrences: list[datetime]
) -> list[asyncpg.Record]:
    return await q.fetch(conn, "insert_cron_runs", tenant_id=tenant_id, name=name, occurrences=occurrences)


async def set_next_fire(
    conn: asyncpg.Connection, tenant_id: str, name: str, next_fire_at: datetime | None
) -> None:
    await q.execute(conn, "set_next_fire", tenant_id=tenant_id, name=name, next_fire_at=next_fire_at)
