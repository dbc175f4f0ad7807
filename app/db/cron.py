"""The cron statements: lock the jobs due within the horizon, insert their occurrences as runs (the
materializer's and a backfill's), move their next fire."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from app.db import queries as q


async def lock_due_cron_jobs(
    conn: asyncpg.Connection, horizon_seconds: float, limit: int
) -> list[asyncpg.Record]:
    return await q.fetch(conn, "lock_due_cron_jobs", horizon_seconds=horizon_seconds, limit=limit)


async def insert_cron_runs(
    conn: asyncpg.Connection,
    tenant_id: str,
    name: str,
    occurrences: list[datetime],
    *,
    backfill: bool = False,
) -> list[asyncpg.Record]:
    """One row per occurrence, in order: (at, id, scheduled_at, due_at, overlapped); id is null
    unless this made its run. A backfill makes each occurrence whatever the job's overlap policy."""
    return await q.fetch(
        conn, "insert_cron_runs", tenant_id=tenant_id, name=name, occurrences=occurrences, backfill=backfill
    )


async def set_next_fire(
    conn: asyncpg.Connection, tenant_id: str, name: str, next_fire_at: datetime | None
) -> None:
    await q.execute(conn, "set_next_fire", tenant_id=tenant_id, name=name, next_fire_at=next_fire_at)


async def lock_job_for_backfill(conn: asyncpg.Connection, tenant_id: str, name: str) -> asyncpg.Record | None:
    """(schedule, timezone, jitter_seconds) of the job, key-share locked; None if there is none."""
    return await q.fetchrow(conn, "lock_job_for_backfill", tenant_id=tenant_id, name=name)


async def existing_cron_runs(
    conn: asyncpg.Connection, tenant_id: str, name: str, occurrences: list[datetime]
) -> set[datetime]:
    """Those of `occurrences` (not empty) that have their run already."""
    rows = await q.fetch(
        conn,
        "existing_cron_runs",
        tenant_id=tenant_id,
        name=name,
        occurrences=occurrences,
        lo=min(occurrences),
        hi=max(occurrences),
    )
    return {r["scheduled_at"] for r in rows}
