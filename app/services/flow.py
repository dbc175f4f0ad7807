"""Flow control: pausing and resuming a job or a whole tenant. A pause holds every pending run
(out of the claim's range, see migration 0010); runs already dispatched or running finish. Resume
makes the held runs due when they would have been, so those already due go at once, oldest first.
Concurrency slots are granted by the engine's keeper (app.engine.keeper).

A tenant's max_in_flight is one more slot on the same machinery (migration 0014): its runs wait for
it as for a job key's slot, and a run of a limited job in a limited tenant becomes due only once it
holds both."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from app import pending
from app.db import cron as cron_repo
from app.db import flow as flow_repo
from app.db import jobs as job_repo
from app.db import wakeups
from app.domain import JobRecord, job_record
from app.errors import NotFound
from app.services import audit as audit_log
from app.services import cron
from app.services.audit import AuditContext


async def apply_pause(
    conn: asyncpg.Connection, tenant_id: str, job: str | None, paused: bool
) -> list[asyncpg.Record]:
    """Holds (paused) or releases the pending runs of the job, or of the tenant when `job` is None,
    in the caller's transaction. Returns the released runs (id, scheduled_at, due_at); a NOTIFY at
    commit wakes idle engines and lowers their claim floor to the oldest of them. Under the tenant's
    flow lock: a submission in flight is waited for, and one that comes meanwhile reads the new
    pause once this commits."""
    await flow_repo.lock_tenant_flow(conn, tenant_id)
    if paused:
        await flow_repo.hold_paused_runs(conn, tenant_id, job)
        return []
    released = await flow_repo.release_paused_runs(conn, tenant_id, job)
    if released:
        await wakeups.notify_runs_due(conn, min(r["scheduled_at"] for r in released))
    return released


async def set_job_paused(
    pool: asyncpg.Pool,
    tenant_id: str,
    name: str,
    paused: bool,
    *,
    audit: AuditContext,
) -> JobRecord:
    async with pool.acquire() as conn:
        async with conn.transaction():
            job = await flow_repo.set_job_paused(conn, tenant_id, name, paused)
            if job is None:
                raise NotFound(f"job {name!r} not found", field="name")
            if not paused and job["schedule"] is not None:
                # Cron resumes from now (the database's clock): occurrences missed while paused
                # are not made up.
                next_fire_at = cron.next_fire(job["schedule"], job["timezone"], await job_repo.db_now(conn))
                await cron_repo.set_next_fire(conn, tenant_id, name, next_fire_at)
            released = await apply_pause(conn, tenant_id, name, paused)
            action = "job.paused" if paused else "job.resumed"
            await audit_log.record(conn, audit, tenant_id, action, f"job:{name}", {"released": len(released)})
        row = await job_repo.get_job(conn, tenant_id, name)
    await pending.runs_pending(released)
    assert row is not None
    return job_record(row)


async def set_tenant_paused(pool: asyncpg.Pool, tenant_id: str, paused: bool, *, audit: AuditContext) -> None:
    async with pool.acquire() as conn, conn.transaction():
        if not await flow_repo.set_tenant_paused(conn, tenant_id, paused):
            raise NotFound(f"tenant {tenant_id!r} not found", field="tenant_id")
        released = await apply_pause(conn, tenant_id, None, paused)
        action = "tenant.paused" if paused else "tenant.resumed"
        await audit_log.record(
            conn, audit, tenant_id, action, f"tenant:{tenant_id}", {"released": len(released)}
        )
    await pending.runs_pending(released)


@dataclass(frozen=True)
class TenantLimits:
    id: str
    created_at: datetime
    paused: bool
    max_in_flight: int | None
    in_flight: int | None  # runs holding the tenant's slot; None while it has no max_in_flight


def _tenant_limits(row: asyncpg.Record) -> TenantLimits:
    return TenantLimits(**dict(row))  # get_tenant's columns are the fields


async def get_tenant(pool: asyncpg.Pool, tenant_id: str) -> TenantLimits:
    async with pool.acquire() as conn:
        row = await flow_repo.get_tenant(conn, tenant_id)
    if row is None:
        raise NotFound(f"tenant {tenant_id!r} not found", field="tenant_id")
    return _tenant_limits(row)


async def set_tenant_max_in_flight(
    pool: asyncpg.Pool, tenant_id: str, max_in_flight: int | None, *, audit: AuditContext
) -> TenantLimits:
    """Sets (or with None removes) the tenant's max_in_flight, in one transaction under the tenant
    slot's lock, so no keeper grants the tenant anything meanwhile. A tenant that becomes limited
    has its pending runs held and its dispatched and running runs counted (they finish); changing
    the number only changes what the keeper grants next (lowering it kills nothing); removing it
    lets the keeper grant its waiting runs in their order."""
    async with pool.acquire() as conn:
        async with conn.transaction():
            await apply_max_in_flight(conn, tenant_id, max_in_flight)
            await audit_log.record(
                conn,
                audit,
                tenant_id,
                "tenant.patched",
                f"tenant:{tenant_id}",
                {"max_in_flight": max_in_flight},
            )
        limits = await flow_repo.get_tenant(conn, tenant_id)
    assert limits is not None
    return _tenant_limits(limits)


async def apply_max_in_flight(conn: asyncpg.Connection, tenant_id: str, max_in_flight: int | None) -> None:
    """set_tenant_max_in_flight's writes, in the caller's transaction."""
    await flow_repo.lock_tenant_slot(conn, tenant_id)
    row = await flow_repo.set_tenant_max_in_flight(conn, tenant_id, max_in_flight)
    if row is None:
        # The slot row ensured above goes with the rollback.
        raise NotFound(f"tenant {tenant_id!r} not found", field="tenant_id")
    # A submission in flight is waited for; one that comes meanwhile reads the new limit.
    await flow_repo.lock_tenant_flow(conn, tenant_id)
    if max_in_flight is None:
        await flow_repo.forget_tenant_slot(conn, tenant_id)
    elif row["previous"] is None:
        await flow_repo.subject_runs_to_tenant_limit(conn, tenant_id)
