"""Cron materialization and partition maintenance statements."""

from __future__ import annotations

from datetime import date, datetime

import asyncpg

from app.db import queries as q

MAINTENANCE_LOCK_KEY = 0x5C4ED01E  # pg advisory lock id of the partition maintenance leader


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


async def list_day_partitions(conn: asyncpg.Connection) -> list[date]:
    rows = await q.fetch(conn, "list_day_partitions")
    return [datetime.strptime(r["name"].removeprefix("job_runs_p"), "%Y%m%d").date() for r in rows]


async def create_day_partition(conn: asyncpg.Connection, day: date) -> str:
    return str(await q.fetchval(conn, "create_day_partition", day=day))


async def retire_day_partition(conn: asyncpg.Connection, day: date) -> str:
    return str(await q.fetchval(conn, "retire_day_partition", day=day))


async def analyze_stale_partitions(conn: asyncpg.Connection, min_changes: int, max_count: int) -> list[str]:
    rows = await q.fetch(conn, "analyze_stale_partitions", min_changes=min_changes, max_count=max_count)
    return [r["name"] for r in rows]


async def default_partition_days(conn: asyncpg.Connection, before: date) -> list[date]:
    return [r["day"] for r in await q.fetch(conn, "default_partition_days", before=before)]


async def count_default_rows(conn: asyncpg.Connection) -> int:
    return int(await q.fetchval(conn, "count_default_rows"))


async def set_lock_timeout(conn: asyncpg.Connection, value: str) -> None:
    await q.execute(conn, "set_lock_timeout", value=value)


async def try_advisory_lock(conn: asyncpg.Connection, key: int) -> bool:
    return bool(await q.fetchval(conn, "try_advisory_lock", key=key))


async def advisory_unlock(conn: asyncpg.Connection, key: int) -> None:
    await q.execute(conn, "advisory_unlock", key=key)


async def delete_expired_idempotency_keys(conn: asyncpg.Connection, grace_seconds: float, limit: int) -> int:
    status = await q.execute(
        conn, "delete_expired_idempotency_keys", grace_seconds=grace_seconds, limit=limit
    )
    return int(status.split()[-1])
