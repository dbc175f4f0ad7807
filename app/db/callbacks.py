"""The callback outbox (run_callbacks): delivery states, the deliverers' claim and their outcomes."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from app.db import queries as q


async def delivery_states(conn: asyncpg.Connection, run_ids: list[uuid.UUID]) -> dict[uuid.UUID, Any]:
    rows = await q.fetch(conn, "callback_delivery_states", run_ids=run_ids)
    return {r["run_id"]: r for r in rows}


async def claim_callbacks(
    conn: asyncpg.Connection,
    *,
    busy: dict[str, int],
    per_tenant: int,
    limit: int,
    owner: str,
    lease_seconds: float,
) -> list[asyncpg.Record]:
    return await q.fetch(
        conn,
        "claim_callbacks",
        busy_tenants=list(busy),
        busy_counts=list(busy.values()),
        per_tenant=per_tenant,
        limit=limit,
        owner=owner,
        lease_seconds=lease_seconds,
    )


async def finish_callback(
    conn: asyncpg.Connection,
    *,
    id: int,
    epoch: int,
    ok: bool,
    error: str | None,
    max_attempts: int,
    backoff_seconds: float,
    max_backoff_seconds: float,
) -> str | None:
    """The callback's status after this outcome; None when the claim was lost (nothing recorded)."""
    status: str | None = await q.fetchval(
        conn,
        "finish_callback",
        id=id,
        epoch=epoch,
        ok=ok,
        error=error,
        max_attempts=max_attempts,
        backoff_seconds=backoff_seconds,
        max_backoff_seconds=max_backoff_seconds,
    )
    return status
