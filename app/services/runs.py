"""Reading, listing and cancelling runs. Tenant scoping is in the statements: a run of another
tenant is not found, never fetched and then refused (`tenant_id` None is the admin: any tenant)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import asyncpg

from app.db import runs as run_repo
from app.domain import RunRecord, RunStatus, run_record
from app.errors import Conflict, NotFound


def _not_found(run_id: UUID) -> NotFound:
    return NotFound(f"run {run_id} not found", field="run_id")


async def get_run(pool: asyncpg.Pool, run_id: UUID, tenant_id: str | None) -> RunRecord:
    return run_record(await _get_row(pool, run_id, tenant_id))


async def get_run_and_trace(
    pool: asyncpg.Pool, run_id: UUID, tenant_id: str | None
) -> tuple[RunRecord, str | None]:
    """The run and the W3C traceparent stored with it (the dashboard shows its trace id)."""
    row = await _get_row(pool, run_id, tenant_id)
    return run_record(row), row["traceparent"]


async def _get_row(pool: asyncpg.Pool, run_id: UUID, tenant_id: str | None) -> asyncpg.Record:
    try:
        async with pool.acquire() as conn:
            row = await run_repo.get_run(conn, run_id, tenant_id)
    except OverflowError:
        # The id's leading 48 bits name a moment past year 9999 (about one random UUID in ten):
        # no run has such an id, so it is 404 like any other unknown id, not a 500.
        row = None
    if row is None:
        raise _not_found(run_id)
    return row


async def list_runs(
    pool: asyncpg.Pool,
    tenant_id: str,
    *,
    status: RunStatus | None,
    job: str | None,
    after: tuple[datetime, UUID] | None,
    limit: int,
) -> list[RunRecord]:
    """Newest scheduled first, from after `after` ((scheduled_at, id) of the previous page's last)."""
    async with pool.acquire() as conn:
        rows = await run_repo.list_runs(conn, tenant_id, status=status, job=job, cursor=after, limit=limit)
    return [run_record(r) for r in rows]


async def cancel_run(pool: asyncpg.Pool, run_id: UUID, tenant_id: str | None) -> RunRecord:
    """Cancels a run no worker has started. Not the tenant's (or no such run): NotFound; started or
    finished: Conflict naming its status."""
    try:
        async with pool.acquire() as conn:
            row = await run_repo.cancel_run(conn, run_id, tenant_id)
    except OverflowError:  # an id no run can have (see get_run)
        raise _not_found(run_id) from None
    if row is not None:
        return run_record(row)
    latest = await get_run(pool, run_id, tenant_id)  # NotFound if it is not the tenant's
    raise Conflict(
        f"run {run_id} is {latest['status']}; only pending or dispatched runs can be cancelled",
        field="status",
    )
