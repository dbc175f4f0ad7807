"""Job definitions: validation of target, schedule and time zone, the tenant's job limit, the
first next fire; reading, listing and deleting them. Every statement names the tenant."""

from __future__ import annotations

from typing import Any

import asyncpg

from app import pending
from app.db import flow as flow_repo
from app.db import jobs as job_repo
from app.db import tenants as tenant_repo
from app.domain import JobRecord, job_record
from app.errors import InvalidInput, NotFound
from app.services import audit as audit_log
from app.services import cron
from app.services.audit import AuditContext
from app.services.callbacks import validate_callback
from app.services.flow import apply_pause
from app.services.targets import validate_target
from app.services.validation import check_payload


async def put_job(
    pool: asyncpg.Pool,
    tenant_id: str,
    name: str,
    fields: dict[str, Any],
    *,
    allow_private_targets: bool,
    max_payload_bytes: int,
    max_payload_depth: int,
    max_jobs: int,
    audit: AuditContext,
) -> tuple[JobRecord, bool]:
    """Upsert a job; returns (job, created). Changing the schedule recomputes next_fire_at."""
    # An unknown tenant is 404 before the body is judged (and its target's host resolved).
    async with pool.acquire() as conn:
        if not await tenant_repo.tenant_exists(conn, tenant_id):
            raise NotFound(f"tenant {tenant_id!r} not found", field="tenant_id")
    try:
        target = await validate_target(fields["target"], allow_private=allow_private_targets)
    except UnicodeError as exc:  # the resolver's IDNA codec: a label over 63 characters, say
        raise InvalidInput(
            f"target.url has a host name that is not valid: {exc}", field="target.url"
        ) from None
    check_payload(fields["payload"], max_payload_bytes, max_depth=max_payload_depth, field="payload")
    callback = await validate_callback(
        fields["callback"], field="callback", allow_private=allow_private_targets
    )
    if fields["concurrency"] is not None and fields["rate_limit"] is not None:
        # A run has one flow key and waits for one thing at a time (migration 0013).
        raise InvalidInput("a job takes a concurrency limit or a rate limit, not both", field="rate_limit")
    check_dedupe_rules(fields["unique"], fields["debounce"])
    schedule = fields["schedule"]
    cron.validate_timezone(fields["timezone"])
    if schedule is not None:
        cron.validate_schedule(schedule)
    else:
        for field, default in (("overlap", "allow"), ("jitter_seconds", 0)):
            if fields[field] != default:
                raise InvalidInput(f"{field} applies to a cron job; this one has no schedule", field=field)
    async with pool.acquire() as conn, conn.transaction():
        counted = await job_repo.lock_tenant_job_count(conn, tenant_id, name)
        if counted is None:
            raise NotFound(f"tenant {tenant_id!r} not found", field="tenant_id")
        jobs, present = counted
        if not present and jobs >= max_jobs:
            raise InvalidInput(
                f"tenant {tenant_id!r} has {jobs} jobs; the limit is {max_jobs} (SCHEDULER_TENANT_MAX_JOBS)",
                field="name",
            )
        next_fire_at = None
        if schedule is not None and not fields["paused"]:
            # The database's clock decides when things are due, never this node's.
            next_fire_at = cron.next_fire(schedule, fields["timezone"], await job_repo.db_now(conn))
        row = await job_repo.upsert_job(
            conn,
            tenant_id,
            name,
            **{**fields, "target": target, "callback": callback, "next_fire_at": next_fire_at},
        )
        # `paused` means what the pause and resume routes mean: the job's pending runs follow it.
        released = await apply_pause(conn, tenant_id, name, fields["paused"])
        # Its limits take effect at once: a key waiting for its window looks again (a raised or
        # removed rate limit may give room sooner than the old one said).
        await flow_repo.wake_flow_keys(conn, tenant_id, name)
        await audit_log.record(
            conn, audit, tenant_id, "job.put", f"job:{name}", {"created": bool(row["inserted"])}
        )
    await pending.runs_pending(released)
    return job_record(row), bool(row["inserted"])


def check_dedupe_rules(unique: dict[str, Any] | None, debounce: dict[str, Any] | None) -> None:
    """A job's unique and debounce rules, each already bounded, taken together."""
    if unique is not None and debounce is not None:
        # A debounce is a rule about one pending run per key already; both would answer the same
        # submission two ways.
        raise InvalidInput("a job takes a unique rule or a debounce, not both", field="debounce")
    if debounce is not None and debounce["max_delay_seconds"] < debounce["period_seconds"]:
        raise InvalidInput(
            "debounce.max_delay_seconds must be at least period_seconds", field="debounce.max_delay_seconds"
        )


async def list_jobs(pool: asyncpg.Pool, tenant_id: str, after: str | None, limit: int) -> list[JobRecord]:
    """The tenant's jobs by name, from after `after` (the previous page's last name)."""
    async with pool.acquire() as conn:
        rows = await job_repo.list_jobs(conn, tenant_id, after or "", limit)
    return [job_record(r) for r in rows]


async def get_job(pool: asyncpg.Pool, tenant_id: str, name: str) -> JobRecord:
    async with pool.acquire() as conn:
        row = await job_repo.get_job(conn, tenant_id, name)
    if row is None:
        raise NotFound(f"job {name!r} not found", field="name")
    return job_record(row)


async def delete_job(pool: asyncpg.Pool, tenant_id: str, name: str, *, audit: AuditContext) -> None:
    """Deletes the job and cancels its runs that no worker has started, in one transaction."""
    async with pool.acquire() as conn, conn.transaction():
        if not await job_repo.delete_job(conn, tenant_id, name):
            raise NotFound(f"job {name!r} not found", field="name")
        await audit_log.record(conn, audit, tenant_id, "job.deleted", f"job:{name}")
