"""Groups of runs (run_groups, migration 0024): create, add to, read, list, and the engine's firing
of completed groups; the jobs subscribed to an event."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg

from app.db import queries as q
from app.db.run_ids import bounds_of


async def insert_group(
    conn: asyncpg.Connection,
    *,
    id: uuid.UUID,
    tenant_id: str,
    name: str,
    on_complete: dict[str, Any] | None,
    total: int,
) -> asyncpg.Record:
    row = await q.fetchrow(
        conn,
        "insert_group",
        id=id,
        tenant_id=tenant_id,
        name=name,
        on_complete=on_complete,
        total=total,
    )
    assert row is not None
    return row


async def add_group_runs(
    conn: asyncpg.Connection, tenant_id: str, group_id: uuid.UUID, added: int
) -> asyncpg.Record | None:
    """The open group with `added` more runs counted; None if it is completed, unknown or another
    tenant's."""
    return await q.fetchrow(conn, "add_group_runs", id=group_id, tenant_id=tenant_id, added=added)


async def get_group(conn: asyncpg.Connection, tenant_id: str, group_id: uuid.UUID) -> asyncpg.Record | None:
    return await q.fetchrow(conn, "get_group", id=group_id, tenant_id=tenant_id)


async def group_of_runs(conn: asyncpg.Connection, run_ids: list[uuid.UUID]) -> uuid.UUID | None:
    lo, hi = bounds_of(run_ids)
    group_id: uuid.UUID | None = await q.fetchval(conn, "group_of_runs", ids=run_ids, lo=lo, hi=hi)
    return group_id


async def list_groups(
    conn: asyncpg.Connection, tenant_id: str, cursor: tuple[datetime, uuid.UUID] | None, limit: int
) -> list[asyncpg.Record]:
    return await q.fetch(
        conn,
        "list_groups",
        tenant_id=tenant_id,
        cursor_at=cursor[0] if cursor else None,
        cursor_id=cursor[1] if cursor else None,
        limit=limit,
    )


async def list_group_runs(
    conn: asyncpg.Connection, tenant_id: str, group_id: uuid.UUID, **filters: Any
) -> list[asyncpg.Record]:
    """list_runs' filters and page (app.db.runs._page's binds, status and job) within one group."""
    return await q.fetch(conn, "list_group_runs", tenant_id=tenant_id, group_id=group_id, **filters)


async def claim_completed_groups(conn: asyncpg.Connection, limit: int) -> list[asyncpg.Record]:
    """Locked until the caller's transaction ends: call it in one."""
    return await q.fetch(conn, "claim_completed_groups", limit=limit)


async def fire_group(
    conn: asyncpg.Connection, group_id: uuid.UUID, run_id: uuid.UUID | None, error: str | None
) -> None:
    await q.execute(conn, "fire_group", id=group_id, run_id=run_id, error=error)


async def defer_group(
    conn: asyncpg.Connection, group_id: uuid.UUID, delay_seconds: float, error: str
) -> None:
    await q.execute(conn, "defer_group", id=group_id, delay_seconds=delay_seconds, error=error)


async def delete_old_groups(conn: asyncpg.Connection, retention_days: int, limit: int) -> int:
    status = await q.execute(conn, "delete_old_groups", retention_days=retention_days, limit=limit)
    return int(status.split()[-1])


async def insert_group_callback(conn: asyncpg.Connection, group: asyncpg.Record, url: str) -> None:
    await q.execute(
        conn,
        "insert_group_callback",
        id=group["id"],
        tenant_id=group["tenant_id"],
        created_at=group["created_at"],
        url=url,
    )


async def group_callback_states(conn: asyncpg.Connection, ids: list[uuid.UUID]) -> dict[uuid.UUID, Any]:
    rows = await q.fetch(conn, "group_callback_states", ids=ids)
    return {r["group_id"]: r for r in rows}


async def subscribed_jobs(conn: asyncpg.Connection, tenant_id: str, event: str) -> list[str]:
    return [r["name"] for r in await q.fetch(conn, "subscribed_jobs", tenant_id=tenant_id, event=event)]
