"""Flow control's statements: pausing and resuming runs, and granting concurrency slots."""

from __future__ import annotations

from typing import Any, NamedTuple

import asyncpg

from app.db import queries as q


class Key(NamedTuple):
    """A concurrency key: the runs of one job whose payload names the same value."""

    tenant_id: str
    job: str
    key: str


async def set_job_paused(
    conn: asyncpg.Connection, tenant_id: str, name: str, paused: bool
) -> asyncpg.Record | None:
    """(schedule, timezone) of the job, None if the tenant has no such job."""
    return await q.fetchrow(conn, "set_job_paused", tenant_id=tenant_id, name=name, paused=paused)


async def set_tenant_paused(conn: asyncpg.Connection, tenant_id: str, paused: bool) -> bool:
    return await q.fetchrow(conn, "set_tenant_paused", id=tenant_id, paused=paused) is not None


async def hold_paused_runs(conn: asyncpg.Connection, tenant_id: str, job: str | None) -> None:
    """Holds every pending run of the job, or of the tenant when `job` is None."""
    await q.execute(conn, "hold_paused_runs", tenant_id=tenant_id, name=job)


async def release_paused_runs(
    conn: asyncpg.Connection, tenant_id: str, job: str | None
) -> list[asyncpg.Record]:
    """Rows (id, scheduled_at, due_at) of the runs released."""
    return await q.fetch(conn, "release_paused_runs", tenant_id=tenant_id, name=job)


async def rehold_paused_runs(conn: asyncpg.Connection) -> int:
    """Holds the runs of paused jobs and tenants that became pending after the pause; how many."""
    held = 0
    for scope in await q.fetch(conn, "paused_scopes"):
        rows = await q.fetch(conn, "rehold_paused_runs", tenant_id=scope["tenant_id"], name=scope["name"])
        held += len(rows)
    return held


async def waiting_concurrency_keys(conn: asyncpg.Connection, after: Key, limit: int) -> list[Key]:
    rows = await q.fetch(
        conn, "waiting_concurrency_keys", tenant_id=after.tenant_id, job=after.job, key=after.key, limit=limit
    )
    return [Key(r["tenant_id"], r["job"], r["key"]) for r in rows]


def _columns(keys: list[Key]) -> dict[str, Any]:
    return {
        "tenant_ids": [k.tenant_id for k in keys],
        "jobs": [k.job for k in keys],
        "keys": [k.key for k in keys],
    }


async def grant_concurrency_slots(conn: asyncpg.Connection, keys: list[Key]) -> list[asyncpg.Record]:
    """Gives each key's free slots to its oldest waiting runs; rows (id, scheduled_at, due_at) of the
    runs granted. Two statements in one transaction: the keys' row locks first, then the grant, whose
    snapshot therefore sees every slot another engine granted or a run freed before the lock."""
    await q.execute(conn, "ensure_concurrency_slots", **_columns(keys))
    async with conn.transaction():
        rows = await q.fetch(conn, "lock_concurrency_slots", **_columns(keys))
        locked = [Key(r["tenant_id"], r["job"], r["key"]) for r in rows]
        if not locked:
            return []
        return await q.fetch(conn, "grant_concurrency_slots", **_columns(locked))


async def count_held_runs(
    conn: asyncpg.Connection, limit: int, tenant_id: str | None = None
) -> dict[str, int]:
    """Held runs per reason, each counted up to `limit`: the tenant's, or every tenant's (None)."""
    rows = await q.fetch(conn, "count_held_runs", limit=limit, tenant_id=tenant_id)
    return {r["reason"]: int(r["runs"]) for r in rows}
