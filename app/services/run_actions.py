"""Bulk actions on a tenant's runs by filter: cancel or retry up to 10,000 runs in one request.

The runs are taken in chunks, in the listing's order (newest scheduled first). Each chunk is two
short steps: read the matching keys (no locks), then one fenced transition over them
(run_repo.cancel_runs / retry_runs) in a transaction with the request's audit event (written by the
first transaction that changes runs, its counts brought up to date by each later one:
services.audit.BulkEvent). So no transaction holds locks on thousands of rows,
and the claim runs beside it: a bulk cancel skips the rows the claim (or a worker's start) holds at
that instant and tries them again a few times, as their lock lasts one statement. Every transition
re-checks its status, so a run already in the target state is not changed twice and the request can
be repeated, or resumed from its `next_cursor`. A bulk cancel takes running runs too: each chunk's
running ones are announced to the workers (stop_running) once it is committed.

A bulk retry adds pending runs, so each chunk is admitted against the tenant's backlog quota first,
like a submission. Over the quota: if nothing was changed yet, OverQuota (429, nothing written);
otherwise the request stops before that chunk and answers what it did, with `next_cursor` at the
chunk refused, so the caller resumes once the backlog has drained."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from uuid import UUID

import asyncpg

from app import pending
from app.db import runs as run_repo
from app.db.run_ids import bounds_of, possible
from app.db.runs import TimeRange
from app.domain import CANCELLABLE, RETRYABLE, RunStatus, StopRunning
from app.errors import InvalidInput, OverQuota
from app.services.admission import AdmissionControl
from app.services.audit import AuditContext, BulkEvent, bulk_filter
from app.services.runs import admitted
from app.telemetry import metrics

CHUNK = 500
# A row the claim holds is locked for one statement (milliseconds): tried again this often.
LOCKED_RETRIES = 5
LOCKED_PAUSE_SECONDS = 0.02

Action = Literal["cancel", "retry"]
Cursor = tuple[datetime, UUID]


@dataclass(frozen=True)
class RunFilter:
    statuses: list[RunStatus] | None = None
    job: str | None = None
    ids: list[UUID] | None = None
    scheduled_after: datetime | None = None
    scheduled_before: datetime | None = None
    # The one last_error the runs must have ((None,): none), e.g. a Failures group's: the dashboard's.
    error: tuple[str | None] | None = None
    tags: list[str] | None = None  # every one of them

    def __post_init__(self) -> None:
        after, before = self.scheduled_after, self.scheduled_before
        if after is not None and before is not None and after >= before:
            raise InvalidInput(
                "scheduled_after must be before scheduled_before", field="filter.scheduled_after"
            )
        if self.ids and not all(possible(i) for i in self.ids):
            raise InvalidInput("an id no run can have", field="filter.ids")

    def scheduled(self) -> TimeRange:
        """The time range, narrowed to the days the ids name (so only their partitions are read)."""
        after, before = self.scheduled_after, self.scheduled_before
        if self.ids:
            lo, hi = bounds_of(self.ids)
            after = lo if after is None else max(after, lo)
            before = hi if before is None else min(before, hi)
        return TimeRange(after, before)


@dataclass
class Outcome:
    matched: int = 0
    changed: int = 0
    next_cursor: Cursor | None = None


async def act_on_runs(
    pool: asyncpg.Pool,
    admission: AdmissionControl,
    stop_running: StopRunning,
    tenant_id: str,
    action: Action,
    runs: RunFilter,
    limit: int,
    cursor: Cursor | None,
    *,
    audit: AuditContext,
) -> Outcome:
    """Applies `action` to up to `limit` of the tenant's runs matching `runs`, from `cursor` on,
    recorded as one audit event with the filter and the counts (none if it was refused: OverQuota)."""
    given = {**vars(runs), "statuses": [str(s) for s in runs.statuses] if runs.statuses else None}
    for moment in ("scheduled_after", "scheduled_before"):
        given[moment] = given[moment].isoformat() if given[moment] is not None else None
    detail = {"filter": bulk_filter(given), "limit": limit, "resumed": cursor is not None}
    event = BulkEvent(
        audit, tenant_id, "runs.bulk_cancelled" if action == "cancel" else "runs.bulk_retried", detail
    )
    outcome = await _act(pool, admission, stop_running, tenant_id, action, runs, limit, cursor, event)
    await event.finish(pool, outcome.matched)
    return outcome


async def _act(
    pool: asyncpg.Pool,
    admission: AdmissionControl,
    stop_running: StopRunning,
    tenant_id: str,
    action: Action,
    runs: RunFilter,
    limit: int,
    cursor: Cursor | None,
    event: BulkEvent,
) -> Outcome:
    outcome = Outcome()
    while outcome.matched < limit:
        chunk = await _match(pool, tenant_id, runs, cursor, min(CHUNK, limit - outcome.matched))
        if not chunk:
            return outcome
        sources = CANCELLABLE if action == "cancel" else RETRYABLE
        keys = [r["id"] for r in chunk if r["status"] in sources]
        if keys:
            try:
                changed, done = await _apply(
                    pool,
                    admission,
                    stop_running,
                    tenant_id,
                    action,
                    keys,
                    event,
                    outcome.matched + len(chunk),
                )
            except OverQuota:
                if outcome.changed == 0:
                    raise
                done, changed = False, 0
            outcome.changed += changed
            if not done:  # stop before this chunk: repeating from next_cursor covers it again
                first = chunk[0]
                outcome.next_cursor = cursor or (first["scheduled_at"], UUID(int=first["id"].int + 1))
                return outcome
        outcome.matched += len(chunk)
        last = chunk[-1]
        cursor = (last["scheduled_at"], last["id"])
    outcome.next_cursor = cursor
    return outcome


async def count_matching(pool: asyncpg.Pool, tenant_id: str, runs: RunFilter, limit: int) -> int:
    """How many of the tenant's runs match `runs`, up to `limit`: what act_on_runs would look at
    (the count a confirmation shows). Read in the same chunks by the same statement, so the count
    and the action cannot disagree on what matches."""
    counted: int = 0
    cursor: Cursor | None = None
    while counted < limit:
        chunk = await _match(pool, tenant_id, runs, cursor, min(CHUNK, limit - counted))
        counted += len(chunk)
        if len(chunk) < CHUNK:
            break
        cursor = (chunk[-1]["scheduled_at"], chunk[-1]["id"])
    return counted


async def _match(
    pool: asyncpg.Pool, tenant_id: str, runs: RunFilter, cursor: Cursor | None, limit: int
) -> list[asyncpg.Record]:
    """One chunk of the matching runs' keys (id, scheduled_at, status), after `cursor`."""
    async with pool.acquire() as conn:
        return await run_repo.match_runs(
            conn,
            tenant_id,
            statuses=[str(s) for s in runs.statuses] if runs.statuses is not None else None,
            job=runs.job,
            ids=runs.ids,
            scheduled=runs.scheduled(),
            cursor=cursor,
            limit=limit,
            error=runs.error,
            tags=runs.tags,
        )


async def _apply(
    pool: asyncpg.Pool,
    admission: AdmissionControl,
    stop_running: StopRunning,
    tenant_id: str,
    action: Action,
    keys: list[UUID],
    event: BulkEvent,
    matched: int,
) -> tuple[int, bool]:
    """(runs changed, whether the chunk is done: no run of it is still locked in a source state).
    `matched`: the runs looked at so far, this chunk's included."""
    if action == "retry":
        return await _retry(pool, admission, tenant_id, keys, event, matched), True
    changed, left = 0, keys
    for attempt in range(LOCKED_RETRIES + 1):
        if attempt:
            await asyncio.sleep(LOCKED_PAUSE_SECONDS)
        async with pool.acquire() as conn, conn.transaction():
            cancelled = await run_repo.cancel_runs(conn, tenant_id, left)
            if cancelled:
                await event.changed(conn, len(cancelled), matched)
        changed += len(cancelled)
        running = [r for r in cancelled if r["was"] == RunStatus.RUNNING]
        if running:
            metrics.runs_cancelled_while_running_total.labels("bulk").inc(len(running))
            await stop_running(running)
        gone = {r["id"] for r in cancelled}
        left = [k for k in left if k not in gone]
        if not left:
            break
        async with pool.acquire() as conn:  # those that left a cancellable state are done with
            rows = await run_repo.get_runs(conn, left)
        still = {r["id"] for r in rows if r["status"] in CANCELLABLE}
        left = [k for k in left if k in still]
        if not left:
            break
    metrics.bulk_run_changes_total.labels("cancel").inc(changed)
    return changed, not left


async def _retry(
    pool: asyncpg.Pool,
    admission: AdmissionControl,
    tenant_id: str,
    keys: list[UUID],
    event: BulkEvent,
    matched: int,
) -> int:
    async with pool.acquire() as conn, admitted(admission, tenant_id, conn, len(keys)), conn.transaction():
        rows = await run_repo.retry_runs(conn, tenant_id, keys)
        if rows:
            await event.changed(conn, len(rows), matched)
    metrics.runs_retried_total.labels("bulk").inc(len(rows))
    metrics.bulk_run_changes_total.labels("retry").inc(len(rows))
    await pending.runs_pending(rows)
    return len(rows)
