"""The audit log's rows (migration 0026)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg

from app.db import queries as q


async def insert_event(conn: asyncpg.Connection, tenant_id: str, **fields: Any) -> tuple[datetime, uuid.UUID]:
    row = await q.fetchrow(conn, "insert_audit_event", tenant_id=tenant_id, **fields)
    assert row is not None
    return row["at"], row["id"]


async def update_detail(
    conn: asyncpg.Connection, tenant_id: str, at: datetime, event_id: uuid.UUID, detail: dict[str, Any]
) -> None:
    await q.execute(conn, "update_audit_detail", tenant_id=tenant_id, at=at, id=event_id, detail=detail)


async def list_events(
    conn: asyncpg.Connection,
    tenant_id: str,
    action: str | None,
    cursor: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[asyncpg.Record]:
    return await q.fetch(
        conn,
        "list_audit_events",
        tenant_id=tenant_id,
        action=action,
        cursor_at=cursor[0] if cursor else None,
        cursor_id=cursor[1] if cursor else None,
        limit=limit,
    )
