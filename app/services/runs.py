"""Reading, listing, cancelling, retrying and rescheduling one run. Tenant scoping is in the
statements: a run of another tenant is not found, never fetched and then refused (`tenant_id`
None is the admin: any tenant)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from uuid import UUID

import asyncpg

from app import pending
from app.db import runs as run_repo
from app.db.runs import TimeRange
from app.domain import MAX_ATTEMPTS, RETRYABLE, RunRecord, RunStatus, StopRunning, run_record
from app.errors import Conflict, InvalidInput, NotFound
from app.services import audit as audit_log
from app.services.admission import AdmissionControl
from app.services.audit import AuditContext
from app.services.callbacks import with_delivery_state
from app.telemetry import metrics


def _not_found(run_id: UUID) -> NotFound:
    return NotFound(f"run {run_id} not found", field="run_id")


async def get_run(pool: asyncpg.Pool, run_id: UUID, tenant_id: str | None) -> RunRecord:
    run, _ = await get_run_and_trace(pool, run_id, tenant_id)
    return run


async def get_run_and_trace(
    pool: asyncpg.Pool, run_id: UUID, tenant_id: str | None
) -> tuple[RunRecord, str | None]:
    """The run and the W3C traceparent stored with it (the dashboard shows its trace id)."""
    async with pool.acquire() as conn:
        row = await run_repo.get_run(conn, run_id, tenant_id)
        if row is not None:
            run = run_record(row)
            await with_delivery_state(conn, [run])
            return run, row["traceparent"]
    raise _not_found(run_id)


async def list_runs(
    pool: asyncpg.Pool,
    tenant_id: str,
    *,
    status: RunStatus | None,
    job: str | None,
    scheduled_after: datetime | None = None,
    scheduled_before: datetime | None = None,
    tags: list[str] | None = None,
    after: tuple[datetime, UUID] | None,
    limit: int,
    group: UUID | None = None,
) -> list[RunRecord]:
    """Newest scheduled first, from after `after` ((scheduled_at, id) of the previous page's last);
    scheduled_at in [scheduled_after, scheduled_before) and carrying every one of `tags` where given."""
    scheduled = TimeRange(scheduled_after, scheduled_before)
    async with pool.acquire() as conn:
        rows = await run_repo.list_runs(
            conn,
            tenant_id,
            status=status,
            job=job,
            tags=tags,
            scheduled=scheduled,
            cursor=after,
            limit=limit,
            group=group,
        )
        runs = [run_record(r) for r in rows]
        await with_delivery_state(conn, runs)
    return runs


async def cancel_run(
    pool: asyncpg.Pool, run_id: UUID, tenant_id: str | None, stop_running: StopRunning, *, audit: AuditContext
) -> RunRecord:
    """Cancels a run that has not ended; a running one's worker is then told to stop it. Not the
    tenant's (or no such run): NotFound; ended: Conflict naming its status."""
    async with pool.acquire() as conn:
        async with conn.transaction():
            row = await run_repo.cancel_run(conn, run_id, tenant_id)
            if row is not None:
                await audit_log.record(
                    conn, audit, row["tenant_id"], "run.cancelled", f"run:{run_id}", {"was": row["was"]}
                )
        run = run_record(row) if row is not None else None
        if run is not None:
            await with_delivery_state(conn, [run])  # the obligation the cancel just recorded
    if row is None or run is None:
        latest = await get_run(pool, run_id, tenant_id)  # NotFound if it is not the tenant's
        raise Conflict(
            f"run {run_id} is {latest['status']}; only a run that has not ended can be cancelled",
            field="status",
        )
    if row["was"] == RunStatus.RUNNING:
        metrics.runs_cancelled_while_running_total.labels("run").inc()
        await stop_running([row])
    return run


@contextlib.asynccontextmanager
async def admitted(
    admission: AdmissionControl, tenant_id: str | None, conn: asyncpg.Connection, adding: int
) -> AsyncIterator[None]:
    """Runs the block if `adding` more pending runs fit the tenant's backlog quota (else OverQuota,
    and the block does not run), counted as admitted when it ends without an error. A retry adds to
    the backlog like a submission does. The admin (`tenant_id` None) is not counted."""
    if tenant_id is None:
        yield
        return
    ticket = admission.ticket(tenant_id)
    try:
        await ticket.admit(functools.partial(run_repo.count_pending_runs, conn, tenant_id), adding)
        yield
        ticket.committed()
    finally:
        ticket.release()  # a no-op once committed


async def retry_run(
    pool: asyncpg.Pool,
    admission: AdmissionControl,
    run_id: UUID,
    tenant_id: str | None,
    max_attempts: int | None,
    *,
    audit: AuditContext,
) -> RunRecord:
    """failed | cancelled | expired -> pending, due now, under a new epoch (run_repo.retry_runs). A
    tenant's retry counts against its backlog quota like a submission (OverQuota, nothing written);
    the admin's does not. Another status, or MAX_ATTEMPTS attempts made already: Conflict;
    `max_attempts` not above the attempts made: InvalidInput. A deadline that has passed is dropped
    (an expired run's always has), one still ahead stays."""
    async with pool.acquire() as conn, admitted(admission, tenant_id, conn, 1), conn.transaction():
        rows = await run_repo.retry_runs(conn, tenant_id, [run_id], max_attempts)
        if rows:
            detail = {"max_attempts": max_attempts} if max_attempts is not None else {}
            await audit_log.record(conn, audit, rows[0]["tenant_id"], "run.retried", f"run:{run_id}", detail)
    if rows:
        metrics.runs_retried_total.labels("run").inc()
        await pending.runs_pending(rows)
        return run_record(rows[0])
    latest = await get_run(pool, run_id, tenant_id)  # NotFound if it is not the tenant's
    if latest["status"] in RETRYABLE and latest["attempt"] >= MAX_ATTEMPTS:
        raise Conflict(
            f"run {run_id} made {latest['attempt']} attempts and a run makes at most {MAX_ATTEMPTS}; "
            "submit a new run",
            field="attempt",
        )
    if latest["status"] in RETRYABLE:
        raise InvalidInput(
            f"max_attempts must be more than the {latest['attempt']} attempts already made",
            field="max_attempts",
        )
    raise Conflict(
        f"run {run_id} is {latest['status']}; only failed, cancelled or expired runs can be retried",
        field="status",
    )


async def reschedule_run(
    pool: asyncpg.Pool,
    run_id: UUID,
    tenant_id: str | None,
    due_at: datetime,
    max_ahead_days: int,
    *,
    audit: AuditContext,
) -> RunRecord:
    """Moves a pending run's due_at (a past time means now; more than `max_ahead_days` ahead:
    InvalidInput, nothing written). Another status: Conflict."""
    if due_at > datetime.now(UTC) + timedelta(days=max_ahead_days):
        raise InvalidInput(f"due_at is more than {max_ahead_days} days ahead", field="due_at")
    async with pool.acquire() as conn, conn.transaction():
        row = await run_repo.reschedule_run(conn, run_id, tenant_id, due_at)
        if row is not None:
            await audit_log.record(
                conn,
                audit,
                row["tenant_id"],
                "run.rescheduled",
                f"run:{run_id}",
                {"due_at": due_at.isoformat()},
            )
    if row is not None:
        metrics.runs_rescheduled_total.inc()
        await pending.runs_pending([row])
        return run_record(row)
    latest = await get_run(pool, run_id, tenant_id)  # NotFound if it is not the tenant's
    raise Conflict(
        f"run {run_id} is {latest['status']}; only pending runs can be rescheduled", field="status"
    )
