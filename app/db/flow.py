"""Flow control's statements: pausing and resuming runs, granting concurrency slots and rate
limits' room, and a tenant's max_in_flight."""

from __future__ import annotations

from typing import Any, NamedTuple

import asyncpg

from app.db import queries as q
from app.domain import HeldReason


class Key(NamedTuple):
    """A concurrency or rate limit's key: the runs of one job whose payload names the same value."""

    tenant_id: str
    job: str
    key: str


async def set_job_paused(
    conn: asyncpg.Connection, tenant_id: str, name: str, paused: bool
) -> asyncpg.Record | None:
    """(schedule, timezone) of the job, None if the tenant has no such job."""
    return await q.fetchrow(conn, "set_job_paused", tenant_id=tenant_id, name=name, paused=paused)


async def lock_tenant_flow(conn: asyncpg.Connection, tenant_id: str) -> None:
    """Waits for the statements in flight that make the tenant's runs pending, then holds them off
    until the transaction ends (migration 0016): every pause or resume (of the tenant or one of its
    jobs) and every write of its max_in_flight takes it, so no run is made pending under the setting
    it replaces. Taken after the writer's row locks (tenant, job), never before: the cron
    materializer takes it while holding its job's row, so a pause holding it first would wait for
    that row while the materializer waits for it."""
    await q.execute(conn, "lock_tenant_flow", tenant_id=tenant_id)


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


async def wake_flow_keys(conn: asyncpg.Connection, tenant_id: str, job: str) -> None:
    await q.execute(conn, "wake_flow_keys", tenant_id=tenant_id, name=job)


async def rehold_paused_runs(conn: asyncpg.Connection) -> int:
    """Holds the runs of paused jobs and tenants that became pending after the pause; how many."""
    held = 0
    for scope in await q.fetch(conn, "paused_scopes"):
        rows = await q.fetch(conn, "rehold_paused_runs", tenant_id=scope["tenant_id"], name=scope["name"])
        held += len(rows)
    return held


async def waiting_keys(conn: asyncpg.Connection, held: HeldReason, after: Key, limit: int) -> list[Key]:
    """Keys with runs held for `held` (a slot, or a window's room), after `after`."""
    cursor = {"tenant_id": after.tenant_id, "job": after.job, "key": after.key}
    rows = await q.fetch(conn, "waiting_keys", held=held.value, limit=limit, **cursor)
    return [Key(r["tenant_id"], r["job"], r["key"]) for r in rows]


def _columns(keys: list[Key]) -> dict[str, Any]:
    return {
        "tenant_ids": [k.tenant_id for k in keys],
        "jobs": [k.job for k in keys],
        "keys": [k.key for k in keys],
    }


# The grant statement of each reason a keyed run waits for.
GRANTS = {HeldReason.CONCURRENCY: "grant_concurrency_slots", HeldReason.RATE_LIMIT: "grant_rate_limited_runs"}


async def grant(
    conn: asyncpg.Connection, held: HeldReason, keys: list[Key], **binds: Any
) -> list[asyncpg.Record]:
    """Gives each key's free slots (or its window's room) to its oldest waiting runs; rows (id,
    scheduled_at, due_at) of the runs granted. Two statements in one transaction: the keys' row locks
    first, then the grant, whose snapshot therefore sees every slot (or start) another engine granted
    or a run freed before the lock. Within each tenant's max_in_flight: a run granted takes its
    tenant's slot too, under that slot row's lock. `binds`: the grant's own (a rate limit's
    margin_seconds)."""
    await q.execute(conn, "ensure_concurrency_slots", **_columns(keys))
    async with conn.transaction():
        rows = await q.fetch(conn, "lock_concurrency_slots", **_columns(keys))
        # The tenant slot's row is (tenant_id, '', ''): a job name is never empty (migration 0014).
        # A limited tenant whose row this transaction does not hold has its keys granted nothing.
        locked = [Key(r["tenant_id"], r["job"], r["key"]) for r in rows if r["job"]]
        if not locked:
            return []
        tenants = [r["tenant_id"] for r in rows if not r["job"]]
        return await q.fetch(conn, GRANTS[held], **_columns(locked), locked_tenants=tenants, **binds)


async def sweep_rate_limit_starts(conn: asyncpg.Connection, margin_seconds: float, limit: int) -> int:
    """Deletes up to `limit` window rows that left their window; how many."""
    rows = await q.fetch(conn, "sweep_rate_limit_starts", margin_seconds=margin_seconds, limit=limit)
    return len(rows)


async def sweep_concurrency_slots(conn: asyncpg.Connection, after: Key, limit: int) -> tuple[int, Key | None]:
    """Deletes the lock rows of unused keys among the next `limit` after `after`: (how many, the
    last key looked at; None once past the last)."""
    row = await q.fetchrow(
        conn, "sweep_concurrency_slots", tenant_id=after.tenant_id, job=after.job, key=after.key, limit=limit
    )
    if row is None:
        return 0, None
    return int(row["swept"]), Key(row["tenant_id"], row["job"], row["key"])


async def lock_tenant_slot(conn: asyncpg.Connection, tenant_id: str) -> None:
    """Waits for, then holds until the transaction ends, the tenant slot's row (keepers skip it)."""
    await q.execute(conn, "ensure_tenant_slot", tenant_id=tenant_id)
    await q.execute(conn, "lock_tenant_slot", tenant_id=tenant_id)


async def set_tenant_max_in_flight(
    conn: asyncpg.Connection, tenant_id: str, max_in_flight: int | None
) -> asyncpg.Record | None:
    """(id, previous max_in_flight), None if there is no such tenant."""
    return await q.fetchrow(conn, "set_tenant_max_in_flight", id=tenant_id, max_in_flight=max_in_flight)


async def subject_runs_to_tenant_limit(conn: asyncpg.Connection, tenant_id: str) -> None:
    await q.execute(conn, "subject_runs_to_tenant_limit", tenant_id=tenant_id)


async def forget_tenant_slot(conn: asyncpg.Connection, tenant_id: str) -> None:
    await q.execute(conn, "forget_tenant_slot", tenant_id=tenant_id)


async def get_tenant(conn: asyncpg.Connection, tenant_id: str) -> asyncpg.Record | None:
    """(id, created_at, paused, max_in_flight, in_flight: None when not limited)."""
    return await q.fetchrow(conn, "get_tenant", id=tenant_id)


async def count_held_runs(
    conn: asyncpg.Connection, limit: int, tenant_id: str | None = None
) -> dict[str, int]:
    """Held runs per reason, each counted up to `limit`: the tenant's, or every tenant's (None)."""
    rows = await q.fetch(conn, "count_held_runs", limit=limit, tenant_id=tenant_id)
    return {r["reason"]: int(r["runs"]) for r in rows}
