"""Reference forms of production statements, for tests to prove equivalence against and the bench
to measure beside: correct, slower, never run by the scheduler itself."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from app.db.queries import Conn, parse

SQL = parse(r"""
-- name: claim_due_runs_ranked
-- The plain form of the claim: ROW_NUMBER over the whole due set. It is correct but its cost grows
-- with the backlog (71% of the loop at 100k due runs, measured), so it serves only as the reference
-- that tests compare claim_due_runs against and that the bench measures. It selects; it claims nothing.
-- Order is (priority, due_at): most urgent first, then oldest. Work-conserving fairness: every
-- tenant's share (its first `cap`) first, then the batch's remaining room to the first of the rest.
WITH ranked AS (
    -- Rank every due pending run within its tenant, most urgent and oldest first.
    SELECT r.id, r.scheduled_at, r.priority, r.due_at,
           ROW_NUMBER() OVER (PARTITION BY r.tenant_id ORDER BY r.priority, r.due_at) AS rank
    FROM job_runs r
    WHERE r.status = 'pending' AND r.due_at <= now()
      AND r.scheduled_at >= :floor AND r.scheduled_at <= :ceiling AND r.scheduled_at <= now()
),
shares AS (
    -- Each tenant's share, the first of them overall.
    SELECT id, scheduled_at FROM ranked
    WHERE rank <= :per_tenant_cap
    ORDER BY priority, due_at
    LIMIT :batch_size
),
leftover AS (
    -- The room the shares leave, to the first of the rest.
    SELECT id, scheduled_at FROM ranked
    WHERE id NOT IN (SELECT id FROM shares)
    ORDER BY priority, due_at
    LIMIT GREATEST(:batch_size - (SELECT count(*) FROM shares), 0)
)
SELECT id, scheduled_at FROM shares
UNION ALL
SELECT id, scheduled_at FROM leftover;
""")


async def claim_due_runs_ranked(
    conn: Conn, *, floor: datetime, ceiling: datetime, per_tenant_cap: int, batch_size: int
) -> list[asyncpg.Record]:
    """Each tenant's first `per_tenant_cap` due runs by (priority, due_at), the first `batch_size` of
    those, and the room they leave to the first of the rest."""
    q = SQL["claim_due_runs_ranked"]
    rows: list[asyncpg.Record] = await conn.fetch(
        q.sql,
        *q.args(
            {"floor": floor, "ceiling": ceiling, "per_tenant_cap": per_tenant_cap, "batch_size": batch_size}
        ),
    )
    return rows
