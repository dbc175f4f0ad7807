"""Partition maintenance statements: the day partitions of job_runs, of run_tags and of audit_events,
DEFAULT, statistics."""

from __future__ import annotations

from datetime import date, datetime

import asyncpg

from app.db import queries as q


async def list_day_partitions(conn: asyncpg.Connection, parent: str = "job_runs") -> list[date]:
    rows = await q.fetch(conn, "list_day_partitions", parent=parent)
    return [datetime.strptime(r["name"].removeprefix(f"{parent}_p"), "%Y%m%d").date() for r in rows]


async def create_day_partition(conn: asyncpg.Connection, day: date) -> str:
    return str(await q.fetchval(conn, "create_day_partition", day=day))


async def retire_day_partition(conn: asyncpg.Connection, day: date) -> str:
    return str(await q.fetchval(conn, "retire_day_partition", day=day))


async def create_tags_day_partition(conn: asyncpg.Connection, day: date) -> str:
    return str(await q.fetchval(conn, "create_tags_day_partition", day=day))


async def drop_tags_day_partition(conn: asyncpg.Connection, day: date) -> str:
    return str(await q.fetchval(conn, "drop_tags_day_partition", day=day))


async def analyze_stale_partitions(conn: asyncpg.Connection, min_changes: int, max_count: int) -> list[str]:
    rows = await q.fetch(conn, "analyze_stale_partitions", min_changes=min_changes, max_count=max_count)
    return [r["name"] for r in rows]


async def default_partition_days(conn: asyncpg.Connection, before: date) -> list[date]:
    return [r["day"] for r in await q.fetch(conn, "default_partition_days", before=before)]


async def count_default_rows(conn: asyncpg.Connection) -> int:
    return int(await q.fetchval(conn, "count_default_rows"))


async def set_lock_timeout(conn: asyncpg.Connection, value: str) -> None:
    await q.execute(conn, "set_lock_timeout", value=value)


async def create_audit_day_partition(conn: asyncpg.Connection, day: date) -> str:
    return str(await q.fetchval(conn, "create_audit_day_partition", day=day))


async def drop_audit_day_partition(conn: asyncpg.Connection, day: date) -> str:
    return str(await q.fetchval(conn, "drop_audit_day_partition", day=day))


async def audit_default_days(conn: asyncpg.Connection, before: date) -> list[date]:
    return [r["day"] for r in await q.fetch(conn, "audit_default_days", before=before)]
