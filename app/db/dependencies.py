"""Run dependencies (migration 0023): the edges a submission writes, the parents it locks, and the
reads of a run's parents and dependents. The release and the cancel cascade are the trigger's."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from uuid import UUID

import asyncpg

from app.db import queries as q
from app.db.run_ids import bounds_of, scheduled_bounds


async def lock_parents(conn: asyncpg.Connection, tenant_id: str, ids: list[UUID]) -> list[asyncpg.Record]:
    """(id, scheduled_at, status) of the parents of this tenant among `ids` (one per edge, repeats
    counted), each locked and its dependents counted up; an id not answered is unknown here (one
    no run can have, its time past year 9999, included)."""
    possible = [i for i in ids if _possible(i)]
    if not possible:
        return []
    lo, hi = bounds_of(possible)
    return await q.fetch(conn, "lock_parents", tenant_id=tenant_id, ids=possible, lo=lo, hi=hi)


def _possible(run_id: UUID) -> bool:
    try:
        scheduled_bounds(run_id)
    except OverflowError:
        return False
    return True


Edge = tuple[UUID, datetime, UUID, datetime, str, str, bool]


async def insert_dependencies(conn: asyncpg.Connection, tenant_id: str, edges: list[Edge]) -> None:
    """Edges as (child_id, child_scheduled_at, parent_id, parent_scheduled_at, name,
    on_parent_failure, settled)."""
    columns = list(zip(*edges, strict=True))
    await q.execute(
        conn,
        "insert_dependencies",
        tenant_id=tenant_id,
        child_ids=list(columns[0]),
        child_scheduled_ats=list(columns[1]),
        parent_ids=list(columns[2]),
        parent_scheduled_ats=list(columns[3]),
        names=list(columns[4]),
        on_parent_failures=list(columns[5]),
        settleds=list(columns[6]),
    )


async def hold_dependents(
    conn: asyncpg.Connection, children: list[tuple[UUID, datetime, int, bool, list[UUID]]]
) -> None:
    """Children as (id, scheduled_at, parents not settled, pass_results, depends_on)."""
    ids = [c[0] for c in children]
    lo, hi = bounds_of(ids)
    await q.execute(
        conn,
        "hold_dependents",
        ids=ids,
        scheduled_ats=[c[1] for c in children],
        waitings=[c[2] for c in children],
        pass_results=[c[3] for c in children],
        depends_ons=[",".join(str(p) for p in c[4]) for c in children],
        lo=lo,
        hi=hi,
    )


async def cancel_orphans(conn: asyncpg.Connection, orphans: list[tuple[UUID, datetime, str]]) -> None:
    """Runs as (id, scheduled_at, reason): cancelled now, with the reason as last_error."""
    ids = [o[0] for o in orphans]
    lo, hi = bounds_of(ids)
    await q.execute(
        conn,
        "cancel_orphans",
        ids=ids,
        scheduled_ats=[o[1] for o in orphans],
        reasons=[o[2] for o in orphans],
        lo=lo,
        hi=hi,
    )


async def dependents_of(conn: asyncpg.Connection, run_id: UUID, limit: int) -> list[asyncpg.Record]:
    return await q.fetch(conn, "dependents_of", id=run_id, limit=limit)


async def parent_results(conn: asyncpg.Connection, run_id: UUID) -> dict[str, Any]:
    """Each parent's result by the name the run's submission gave it (results are stored bounded
    by SCHEDULER_MAX_RESULT_BYTES)."""
    rows = await q.fetch(conn, "parent_results", id=run_id)
    return {r["name"]: r["result"] for r in rows}


async def forget_day(conn: asyncpg.Connection, day: date) -> None:
    """Deletes the edges of the day's runs (its job_runs partition was dropped)."""
    start = datetime.combine(day, time(), UTC)
    lo, hi = (int(at.timestamp() * 1000) << 80 for at in (start, start + timedelta(days=1)))
    await q.execute(conn, "forget_dependencies_of_day", lo=UUID(int=lo), hi=UUID(int=hi))
