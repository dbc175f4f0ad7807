"""Job definitions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from app.db import queries as q


async def db_now(conn: asyncpg.Connection) -> datetime:
    value: datetime = await q.fetchval(conn, "db_now")
    return value


async def upsert_job(conn: asyncpg.Connection, tenant_id: str, name: str, **fields: Any) -> asyncpg.Record:
    row = await q.fetchrow(conn, "upsert_job", tenant_id=tenant_id, name=name, **fields)
    assert row is not None
    return row


async def lock_tenant_job_count(
    conn: asyncpg.Connection, tenant_id: str, name: str
) -> tuple[int, bool] | None:
    """(jobs, this name exists) under a lock on the tenant that holds until the caller's transaction
    ends; None if the tenant does not exist."""
    if await q.fetchval(conn, "lock_tenant_for_job_create", tenant_id=tenant_id) is None:
        return None
    row = await q.fetchrow(conn, "count_jobs", tenant_id=tenant_id, name=name)
    assert row is not None
    return int(row["jobs"]), bool(row["present"])


async def get_job(conn: asyncpg.Connection, tenant_id: str, name: str) -> asyncpg.Record | None:
    return await q.fetchrow(conn, "get_job", tenant_id=tenant_id, name=name)


async def list_jobs(conn: asyncpg.Connection, tenant_id: str, after: str, limit: int) -> list[asyncpg.Record]:
    return await q.fetch(conn, "list_jobs", tenant_id=tenant_id, after=after, limit=limit)


async def delete_job(conn: asyncpg.Connection, tenant_id: str, name: str) -> bool:
    """Deletes the job and cancels its runs that no worker has started, in the caller's transaction."""
    deleted = await q.fetchrow(conn, "delete_job", tenant_id=tenant_id, name=name)
    if deleted is None:
        return False
    await q.execute(conn, "cancel_pending_runs_of_job", tenant_id=tenant_id, name=name)
    return True
