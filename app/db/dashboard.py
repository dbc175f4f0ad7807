"""The dashboard's aggregate reads (Overview, Failures). `tenant_id` None is the admin: all tenants."""

from __future__ import annotations

import asyncpg

from app.db import queries as q


async def status_counts(conn: asyncpg.Connection, tenant_id: str | None) -> dict[str, int]:
    rows = await q.fetch(conn, "dashboard_status_counts", tenant_id=tenant_id)
    return {r["status"]: int(r["runs"]) for r in rows}


async def timings(conn: asyncpg.Connection, tenant_id: str | None, minutes: int) -> asyncpg.Record:
    row = await q.fetchrow(conn, "dashboard_timings", tenant_id=tenant_id, minutes=minutes)
    assert row is not None
    return row


async def oldest_due_pending(conn: asyncpg.Connection, tenant_id: str | None) -> asyncpg.Record | None:
    return await q.fetchrow(conn, "dashboard_oldest_due_pending", tenant_id=tenant_id)


async def failure_groups(
    conn: asyncpg.Connection, tenant_id: str, days: int, limit: int
) -> list[asyncpg.Record]:
    return await q.fetch(conn, "dashboard_failure_groups", tenant_id=tenant_id, days=days, limit=limit)
