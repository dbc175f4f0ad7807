"""Runs as the API sees them: insert, read, list, cancel, retry, reschedule, the chunks of bulk
actions, and the idempotency-key table."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import asyncpg
import orjson

from app.db import groups
from app.db import queries as q
from app.db.run_ids import bounds_of, scheduled_bounds
from app.db.wakeups import DUE_CHANNEL
from app.domain import MAX_ATTEMPTS, MAX_TAGS, HeldReason

T = TypeVar("T")


@dataclass(frozen=True)
class TimeRange:
    """scheduled_at in [after, before); None: unbounded on that side."""

    after: datetime | None = None
    before: datetime | None = None


async def insert_runs(
    conn: asyncpg.Connection,
    tenant_id: str,
    jobs: list[str],
    scheduled_ats: list[datetime | None],
    payloads: list[Any],
    idempotency_keys: list[str | None],
    callbacks: list[dict[str, Any] | None],
    traceparent: str | None,
    priorities: list[int | None],  # None: the job's priority
    tags: list[list[str] | None] | None = None,  # added to the job's default tags; None: no run's
    metadatas: list[dict[str, Any] | None] | None = None,  # None: no run's
    notify: bool = True,
    expires_ats: list[datetime | None] | None = None,  # None in it: the job's expire_after_seconds
    run_ids: list[uuid.UUID | None] | None = None,
    dedupe_keys: list[str | None] | None = None,
    group_id: uuid.UUID | None = None,
) -> list[asyncpg.Record]:
    """The runs, in input order (every one in the group `group_id`, if given); none at all if one
    names a job the tenant does not have, or a job
    with a unique or debounce rule without the id and key claim_dedupe_keys claimed for it
    (`run_ids`, `dedupe_keys`: None on the default path)."""
    return await q.fetch(
        conn,
        "insert_runs",
        notify=notify,
        run_ids=run_ids,
        dedupe_keys=dedupe_keys,
        group_id=group_id,
        tenant_id=tenant_id,
        jobs=jobs,
        scheduled_ats=scheduled_ats,
        # JSON text, not Python values: asyncpg encodes a list inside an array parameter as another
        # array dimension, which turned a payload [1, 2] into 1 (or failed on mixed shapes).
        payloads=[None if p is None else orjson.dumps(p).decode() for p in payloads],
        idempotency_keys=idempotency_keys,
        priorities=priorities,
        callbacks=[None if c is None else orjson.dumps(c).decode() for c in callbacks],
        expires_ats=expires_ats or [None] * len(jobs),
        tags=_per_run(tags, lambda t: ",".join(t) or None),  # no tag has a comma (TAG_PATTERN)
        metadatas=_per_run(metadatas, lambda m: orjson.dumps(m).decode()),
        max_tags=MAX_TAGS,
        traceparent=traceparent,
        channel=DUE_CHANNEL,
    )


def _per_run(values: list[T | None] | None, encode: Callable[[T], str | None]) -> list[str | None] | None:
    """An optional field of each run as text; None when no run has it: unnest pads a missing array
    with NULLs, so a batch without tags or metadata sends nothing more for them."""
    if values is None or all(v is None for v in values):
        return None
    return [None if v is None else encode(v) for v in values]


async def job_tags(conn: asyncpg.Connection, tenant_id: str, names: list[str]) -> dict[str, list[str]]:
    """The default tags of those of these jobs the tenant has, by name."""
    rows = await q.fetch(conn, "job_tags", tenant_id=tenant_id, names=list(dict.fromkeys(names)))
    return {r["name"]: r["tags"] or [] for r in rows}


async def find_idempotency_keys(
    conn: asyncpg.Connection, tenant_id: str, keys: list[str]
) -> list[asyncpg.Record]:
    return await q.fetch(conn, "find_idempotency_keys", tenant_id=tenant_id, keys=keys)


async def insert_idempotency_keys(
    conn: asyncpg.Connection,
    tenant_id: str,
    keys: list[str],
    run_ids: list[uuid.UUID],
    run_scheduled_ats: list[datetime],
    body_hashes: list[str],
    grace_seconds: float,
    in_flight_wait_ms: int,
) -> set[str]:
    rows = await q.fetch(
        conn,
        "insert_idempotency_keys",
        tenant_id=tenant_id,
        keys=keys,
        run_ids=run_ids,
        run_scheduled_ats=run_scheduled_ats,
        body_hashes=body_hashes,
        grace_seconds=grace_seconds,
        in_flight_wait=f"{in_flight_wait_ms}ms",
    )
    return {r["key"] for r in rows}


async def count_pending_runs(conn: asyncpg.Connection, tenant_id: str, limit: int) -> int:
    """The tenant's pending runs, held ones included, counted up to `limit`."""
    reasons = [reason.value for reason in HeldReason]
    return int(
        await q.fetchval(conn, "count_pending_runs", tenant_id=tenant_id, limit=limit, held_reasons=reasons)
    )


async def get_run(
    conn: asyncpg.Connection, run_id: uuid.UUID, tenant_id: str | None
) -> asyncpg.Record | None:
    """The run, if it belongs to `tenant_id` (None: any tenant's)."""
    lo, hi = scheduled_bounds(run_id)
    return await q.fetchrow(conn, "get_run", id=run_id, lo=lo, hi=hi, tenant_id=tenant_id)


async def get_runs(conn: asyncpg.Connection, run_ids: list[uuid.UUID]) -> list[asyncpg.Record]:
    lo, hi = bounds_of(run_ids)
    return await q.fetch(conn, "get_runs", ids=run_ids, lo=lo, hi=hi)


def _page(scheduled: TimeRange, cursor: tuple[datetime, uuid.UUID] | None, limit: int) -> dict[str, Any]:
    """The binds list_runs and match_runs share: the time range and the keyset page."""
    return {
        "scheduled_after": scheduled.after,
        "scheduled_before": scheduled.before,
        "cursor_at": cursor[0] if cursor else None,
        "cursor_id": cursor[1] if cursor else None,
        "limit": limit,
    }


async def list_runs(
    conn: asyncpg.Connection,
    tenant_id: str,
    *,
    status: str | None,
    job: str | None,
    tags: list[str] | None,
    scheduled: TimeRange,
    cursor: tuple[datetime, uuid.UUID] | None,
    limit: int,
    group: uuid.UUID | None = None,
) -> list[asyncpg.Record]:
    """`tags`: only runs carrying every one (read through run_tags, list_tagged_runs); `group`: only
    the group's (read through its index, list_group_runs)."""
    if group is not None:
        return await groups.list_group_runs(
            conn, tenant_id, group, status=status, job=job, tags=tags, **_page(scheduled, cursor, limit)
        )
    return await q.fetch(
        conn,
        "list_runs" if not tags else "list_tagged_runs",
        tenant_id=tenant_id,
        status=status,
        job=job,
        **_page(scheduled, cursor, limit),
        **({"tags": tags} if tags else {}),
    )


async def match_runs(
    conn: asyncpg.Connection,
    tenant_id: str,
    *,
    statuses: list[str] | None,
    job: str | None,
    ids: list[uuid.UUID] | None,
    scheduled: TimeRange,
    cursor: tuple[datetime, uuid.UUID] | None,
    limit: int,
    error: tuple[str | None] | None = None,
    tags: list[str] | None = None,
) -> list[asyncpg.Record]:
    """(id, scheduled_at, status) of the tenant's runs matching a bulk action's filter, one chunk.
    `error`, when given, is the one last_error the runs must have (None in it: no error); `tags`,
    the tags they must all carry."""
    return await q.fetch(
        conn,
        "match_runs" if not tags else "match_tagged_runs",
        **({"tags": tags} if tags else {}),
        tenant_id=tenant_id,
        statuses=statuses,
        job=job,
        ids=ids,
        by_error=error is not None,
        error=error[0] if error is not None else None,
        **_page(scheduled, cursor, limit),
    )


async def run_lateness(
    conn: asyncpg.Connection, run_id: uuid.UUID, tenant_id: str | None, limit: int
) -> asyncpg.Record | None:
    """What holds a pending run back (see the statement); None if it is not `tenant_id`'s (None:
    any tenant's) or not pending."""
    lo, hi = scheduled_bounds(run_id)
    return await q.fetchrow(conn, "run_lateness", id=run_id, lo=lo, hi=hi, tenant_id=tenant_id, limit=limit)


def _ids(run_ids: list[uuid.UUID]) -> dict[str, Any]:
    lo, hi = bounds_of(run_ids)
    return {"ids": run_ids, "lo": lo, "hi": hi}


async def cancel_runs(
    conn: asyncpg.Connection, tenant_id: str, run_ids: list[uuid.UUID]
) -> list[asyncpg.Record]:
    """Cancels those of the tenant's runs that have not ended and are not locked at this instant;
    returns (id, epoch, was) of each run cancelled, `was` the status it had."""
    return await q.fetch(conn, "cancel_runs", tenant_id=tenant_id, **_ids(run_ids))


async def retry_runs(
    conn: asyncpg.Connection,
    tenant_id: str | None,
    run_ids: list[uuid.UUID],
    max_attempts: int | None = None,
) -> list[asyncpg.Record]:
    """failed | cancelled | expired -> pending, due now, new epoch; the retried rows. `tenant_id`
    None: any. A run that made MAX_ATTEMPTS attempts is not retried."""
    return await q.fetch(
        conn,
        "retry_runs",
        tenant_id=tenant_id,
        max_attempts=max_attempts,
        attempts_cap=MAX_ATTEMPTS,
        channel=DUE_CHANNEL,
        **_ids(run_ids),
    )


async def reschedule_run(
    conn: asyncpg.Connection, run_id: uuid.UUID, tenant_id: str | None, due_at: datetime
) -> asyncpg.Record | None:
    """The pending run with its new due_at; None if not `tenant_id`'s (None: any) or not pending."""
    lo, hi = scheduled_bounds(run_id)
    return await q.fetchrow(
        conn,
        "reschedule_run",
        id=run_id,
        lo=lo,
        hi=hi,
        tenant_id=tenant_id,
        due_at=due_at,
        channel=DUE_CHANNEL,
    )


async def cancel_run(
    conn: asyncpg.Connection, run_id: uuid.UUID, tenant_id: str | None
) -> asyncpg.Record | None:
    """The cancelled run, with `was`: the status it had; None if it is not `tenant_id`'s (None: any
    tenant's) or has ended."""
    lo, hi = scheduled_bounds(run_id)
    return await q.fetchrow(conn, "cancel_run", id=run_id, lo=lo, hi=hi, tenant_id=tenant_id)


async def delete_expired_idempotency_keys(conn: asyncpg.Connection, grace_seconds: float, limit: int) -> int:
    """Deletes up to `limit` keys past their floor whose run is gone or long finished; how many."""
    status = await q.execute(
        conn, "delete_expired_idempotency_keys", grace_seconds=grace_seconds, limit=limit
    )
    return int(status.split()[-1])
