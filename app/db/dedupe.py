"""Unique and debounced runs' keys (dedupe_keys, migration 0021): claiming them for the runs about to
be inserted, who holds a key, folding a debounced submission into its pending run, and sweeping keys
that hold nothing any more."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import orjson

from app.db import queries as q
from app.db.run_ids import bounds_of
from app.db.wakeups import DUE_CHANNEL


@dataclass(frozen=True, order=True)
class DedupeKey:
    tenant_id: str
    job: str
    key: str


@dataclass(frozen=True)
class Fold:
    """One submission folded into the run holding its debounced key."""

    run_id: uuid.UUID
    job: str
    key: str
    payload: Any | None  # None: the job's payload
    scheduled_at: datetime | None  # None: now


async def claim_dedupe_keys(
    conn: asyncpg.Connection,
    tenant_id: str,
    jobs: list[str],
    scheduled_ats: list[datetime | None],
    payloads: list[Any],
    released: list[uuid.UUID],
) -> list[asyncpg.Record]:
    """A row per input, in order (ord, job_exists, key, id, scheduled_at, claimed): the keys of the
    runs of jobs with a rule, claimed for the ids minted here where free (or held by a `released`
    run, its holder found ended under the key's lock)."""
    return await q.fetch(
        conn,
        "claim_dedupe_keys",
        tenant_id=tenant_id,
        jobs=jobs,
        scheduled_ats=scheduled_ats,
        payloads=[None if p is None else orjson.dumps(p).decode() for p in payloads],
        released=released,
    )


async def holders(
    conn: asyncpg.Connection, tenant_id: str, keys: list[tuple[str, str]]
) -> dict[tuple[str, str], asyncpg.Record]:
    """(job, key) -> its row (run_id, run_scheduled_at, window_ends_at, debounced), for the keys
    that have one."""
    rows = await q.fetch(
        conn, "dedupe_holders", tenant_id=tenant_id, jobs=[j for j, _ in keys], keys=[k for _, k in keys]
    )
    return {(r["job"], r["key"]): r for r in rows}


async def debounce_runs(conn: asyncpg.Connection, tenant_id: str, folds: list[Fold]) -> list[asyncpg.Record]:
    """The runs the folds were folded into; a run no longer pending (or holding a slot) is not."""
    run_ids = [f.run_id for f in folds]
    lo, hi = bounds_of(run_ids)
    return await q.fetch(
        conn,
        "debounce_runs",
        tenant_id=tenant_id,
        ids=run_ids,
        jobs=[f.job for f in folds],
        keys=[f.key for f in folds],
        # JSON text, as insert_runs takes payloads.
        payloads=[None if f.payload is None else orjson.dumps(f.payload).decode() for f in folds],
        scheduled_ats=[f.scheduled_at for f in folds],
        lo=lo,
        hi=hi,
        channel=DUE_CHANNEL,
    )


async def sweep_dedupe_keys(
    conn: asyncpg.Connection, after: DedupeKey, limit: int
) -> tuple[int, DedupeKey | None]:
    """Deletes the keys that hold nothing among the next `limit` after `after`: (how many, the last
    key looked at; None once past the last)."""
    row = await q.fetchrow(
        conn, "sweep_dedupe_keys", tenant_id=after.tenant_id, job=after.job, key=after.key, limit=limit
    )
    if row is None:
        return 0, None
    return int(row["swept"]), DedupeKey(row["tenant_id"], row["job"], row["key"])


async def jobs_with_dedupe_rules(conn: asyncpg.Connection, tenant_id: str, names: list[str]) -> bool:
    return bool(await q.fetchval(conn, "jobs_with_dedupe_rules", tenant_id=tenant_id, names=names))
