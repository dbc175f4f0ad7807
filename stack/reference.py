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
WITH ranked AS (
    -- Rank every due pending run within its tenant, oldest first.
    SELECT r.id, r.scheduled_at, r.due_at,
           ROW_NUMBER() OVER (PARTITION BY r.tenant_id ORDER BY r.due_at) AS rank
    FROM job_runs r
    WHERE r.status = 'pending' AND r.due_at <= now()
      AND r.scheduled_at >= :floor AND r.scheduled_at <= :ceiling AND r.scheduled_at <= now()
)
SELECT id, scheduled_at FROM ranked
WHERE rank <= :per_tenant_cap
ORDER BY due_at
LIMIT :batch_size;
""")


async def claim_due_runs_ranked(
    conn: Conn, *, floor: datetime, ceiling: datetime, per_tenant_cap: int, batch_size: int
) -> list[asyncpg.Record]:
    """Each tenant's `per_tenant_cap` oldest due runs, then the oldest `batch_size` of those."""
    q = SQL["claim_due_runs_ranked"]
    rows: list[asyncpg.Record] = await conn.fetch(
        q.sql,
        *q.args(
            {"floor": floor, "ceiling": ceiling, "per_tenant_cap": per_tenant_cap, "batch_size": batch_size}
        ),
    )
    return rows
