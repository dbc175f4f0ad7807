"""Factories that insert rows directly, taking only overrides."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import asyncpg


async def tenant(conn: asyncpg.Connection, tenant_id: str = "acme") -> str:
    await conn.execute(
        "INSERT INTO tenants (id, signing_secret) VALUES ($1, 'whsec_test') ON CONFLICT DO NOTHING", tenant_id
    )
    return tenant_id


async def job(
    conn: asyncpg.Connection,
    tenant_id: str = "acme",
    name: str = "j",
    target: dict | None = None,
    **fields: Any,
) -> str:
    await tenant(conn, tenant_id)
    await conn.execute(
        "INSERT INTO jobs (tenant_id, name, target) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        tenant_id,
        name,
        target or {"type": "noop"},
    )
    return name


async def runs(
    conn: asyncpg.Connection,
    count: int,
    *,
    tenant_id: str = "acme",
    job_name: str = "j",
    start: datetime | None = None,
    step: timedelta = timedelta(milliseconds=1),
    status: str = "pending",
    due_shift: timedelta = timedelta(0),
    max_attempts: int = 3,
    target: dict | None = None,
    priority: int = 5,
) -> list[asyncpg.Record]:
    """`count` runs scheduled from `start` (default one minute ago) every `step`; due_at is
    scheduled_at + due_shift (a retry moves due_at, never scheduled_at)."""
    await job(conn, tenant_id, job_name)
    start = start or (await conn.fetchval("SELECT now()") - timedelta(minutes=1))
    return await conn.fetch(
        """
        INSERT INTO job_runs (id, scheduled_at, tenant_id, job, status, target, max_attempts, backoff_seconds,
                              timeout_seconds, due_at, priority)
        SELECT scheduler_run_id(t), t, $1, $2, $3, $4, $5, 0.1, 30, t + $6, $10
        FROM (SELECT $7::timestamptz + g * $8::interval AS t FROM generate_series(0, $9 - 1) AS g) AS s
        RETURNING id, scheduled_at, due_at, tenant_id, priority
        """,
        tenant_id,
        job_name,
        status,
        target or {"type": "noop"},
        max_attempts,
        due_shift,
        start,
        step,
        count,
        priority,
    )
