"""The run state machine's transitions after submission: claim, publish bookkeeping, the reaper,
the expiry sweep, and the worker's fenced start/heartbeat/finish. Every transition is one conditional
statement."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from app.db import queries as q
from app.db.run_ids import bounds_of
from app.domain import LEAST_URGENT, AttemptOutcome

# A run's last_error when it ends expired, whichever statement ends it (the sweep or a start).
EXPIRED_ERROR = "expired: not started by its deadline (expires_at)"


class Fence:
    """(id, scheduled_at, epoch) of a group of runs, as the fenced statements take them."""

    def __init__(self, items: Sequence[tuple[UUID, datetime, int]]):
        self.ids = [i[0] for i in items]
        self.scheduled_ats = [i[1] for i in items]
        self.epochs = [i[2] for i in items]

    def id_order(self) -> list[int]:
        """Positions in run id order. A statement that locks runs another may lock too (a worker's
        heartbeat and its finish share the runs it executes) names them in this order: both lock
        them one by one in the order named, and two in different orders can each hold a run the
        other waits for, a cycle Postgres breaks by failing one of them."""
        return sorted(range(len(self.ids)), key=self.ids.__getitem__)

    def taken(self, positions: Sequence[int]) -> Fence:
        return Fence([(self.ids[i], self.scheduled_ats[i], self.epochs[i]) for i in positions])

    def binds(self) -> dict[str, Any]:
        return {
            "ids": self.ids,
            "scheduled_ats": self.scheduled_ats,
            "epochs": self.epochs,
            "lo": min(self.scheduled_ats),
            "hi": max(self.scheduled_ats),
        }


async def claim_due_runs(
    conn: asyncpg.Connection,
    *,
    floor: datetime,
    ceiling: datetime,
    per_tenant_cap: int,
    batch_size: int,
    owner: str,
    lease_seconds: float,
    min_priority: int = 0,
    max_priority: int = LEAST_URGENT,
) -> list[asyncpg.Record]:
    return await q.fetch(
        conn,
        "claim_due_runs",
        floor=floor,
        ceiling=ceiling,
        per_tenant_cap=per_tenant_cap,
        batch_size=batch_size,
        owner=owner,
        lease_seconds=lease_seconds,
        min_priority=min_priority,
        max_priority=max_priority,
    )


async def claim_hinted_runs(
    conn: asyncpg.Connection,
    ids: list[UUID],
    *,
    floor: datetime,
    ceiling: datetime,
    per_tenant_cap: int,
    owner: str,
    lease_seconds: float,
) -> list[asyncpg.Record]:
    lo, hi = bounds_of(ids)
    return await q.fetch(
        conn,
        "claim_hinted_runs",
        ids=ids,
        lo=lo,
        hi=hi,
        floor=floor,
        ceiling=ceiling,
        per_tenant_cap=per_tenant_cap,
        owner=owner,
        lease_seconds=lease_seconds,
    )


async def pending_among(conn: asyncpg.Connection, ids: list[UUID]) -> list[asyncpg.Record]:
    lo, hi = bounds_of(ids)
    return await q.fetch(conn, "pending_among", ids=ids, lo=lo, hi=hi)


async def release_unpublished_runs(conn: asyncpg.Connection, fence: Fence) -> list[asyncpg.Record]:
    return await q.fetch(conn, "release_unpublished_runs", **fence.binds())


async def claim_range(conn: asyncpg.Connection) -> tuple[datetime, datetime, datetime | None]:
    """(oldest unfinished run's scheduled_at, the database's now(), the latest scheduled_at of a
    pending run due before it, if any: the claim's ceiling must reach it)."""
    row = await q.fetchrow(conn, "claim_floor")
    assert row is not None
    return row["floor"], row["db_now"], row["pulled_forward"]


async def claim_floor(conn: asyncpg.Connection) -> tuple[datetime, datetime]:
    """(oldest unfinished run's scheduled_at, the database's now())."""
    floor, db_now, _ = await claim_range(conn)
    return floor, db_now


async def due_backlog(conn: asyncpg.Connection, limit: int) -> tuple[float, int]:
    """(age of the oldest due pending run in seconds, due pending runs counted up to `limit`)."""
    row = await q.fetchrow(conn, "due_backlog", limit=limit)
    assert row is not None
    return float(row["oldest_age"]), int(row["runs"])


async def reap_dispatched_runs(
    conn: asyncpg.Connection, limit: int, claimed_before: datetime | None = None
) -> list[asyncpg.Record]:
    return await q.fetch(conn, "reap_dispatched_runs", limit=limit, claimed_before=claimed_before)


async def reap_running_runs(conn: asyncpg.Connection, limit: int, lead: float) -> list[asyncpg.Record]:
    """`lead`: how much longer the dispatch lease is than a run's (0 if it is not): a run's start left
    its queue row under the former, so that row is read this much early."""
    return await q.fetch(conn, "reap_running_runs", limit=limit, lead=lead)


class Starts(dict[UUID, int | None]):
    """What start_runs did: run id -> attempt for the deliveries that matched, None for those not
    started: refused because their job or tenant is paused (back to pending, held), or past their
    deadline (ended expired, in `expired`). Deliveries not in it matched nothing."""

    def __init__(self, rows: Sequence[asyncpg.Record] = ()):
        super().__init__((r["id"], r["attempt"]) for r in rows)
        self.expired = {r["id"] for r in rows if r["expired"]}

    def add(self, other: Starts) -> None:
        self.update(other)
        self.expired |= other.expired

    def unmatched(self, fence: Fence) -> list[int]:
        """Positions in `fence` of the runs this says nothing of."""
        return [i for i, run_id in enumerate(fence.ids) if run_id not in self]


async def start_runs(
    conn: asyncpg.Connection, fence: Fence, inline: list[bool], *, owner: str, lease_seconds: float
) -> Starts:
    """Fenced dispatched -> running (-> succeeded at once where `inline`: nothing to execute), for
    the runs free to start; settle_unstarted_runs settles the others. Two statements, not one, so
    the default path plans only the start (transitions.sql)."""
    rows = await q.fetch(
        conn, "start_runs", inline=inline, owner=owner, lease_seconds=lease_seconds, **fence.binds()
    )
    return Starts(rows)


async def settle_unstarted_runs(
    conn: asyncpg.Connection, fence: Fence, inline: list[bool], *, owner: str, lease_seconds: float
) -> Starts:
    """What start_runs left of a fence: expired when past its deadline to start, back to pending
    (held) when its job or tenant is paused, and started after all when it was resumed meanwhile.
    Each statement commits on its own; a retry after a failure settles again whatever is left."""
    rows = await q.fetch(conn, "settle_unstarted_runs", expired_error=EXPIRED_ERROR, **fence.binds())
    settled = Starts(rows)
    if rest := settled.unmatched(fence):
        settled.add(
            await start_runs(
                conn, fence.taken(rest), [inline[i] for i in rest], owner=owner, lease_seconds=lease_seconds
            )
        )
    return settled


async def expire_runs(conn: asyncpg.Connection, limit: int) -> int:
    """Ends up to `limit` runs past their deadline to start (the sweep); how many."""
    rows = await q.fetch(conn, "expire_runs", limit=limit, expired_error=EXPIRED_ERROR)
    return len(rows)


async def heartbeat_runs(conn: asyncpg.Connection, fence: Fence, lease_seconds: float) -> set[UUID]:
    fence = fence.taken(fence.id_order())
    rows = await q.fetch(conn, "heartbeat_runs", lease_seconds=lease_seconds, **fence.binds())
    return {r["id"] for r in rows}


async def cancelled_among(conn: asyncpg.Connection, fence: Fence) -> set[UUID]:
    """Those of the fenced runs that were cancelled in their epoch."""
    rows = await q.fetch(conn, "cancelled_among", **fence.binds())
    return {r["id"] for r in rows}


async def finish_runs(
    conn: asyncpg.Connection, fence: Fence, outcomes: Sequence[AttemptOutcome]
) -> list[asyncpg.Record]:
    """Fenced running -> succeeded | pending (retry) | failed, one outcome per fenced run, its
    attempt's history entry closed and a success's result stored, in the one statement."""
    order = fence.id_order()
    fence, outcomes = fence.taken(order), [outcomes[i] for i in order]
    return await q.fetch(
        conn,
        "finish_runs",
        oks=[o.ok for o in outcomes],
        errors=[o.error for o in outcomes],
        outcomes=[o.outcome for o in outcomes],
        http_statuses=[o.http_status for o in outcomes],
        retry_afters=[o.retry_after for o in outcomes],
        results=[o.result.json for o in outcomes],
        results_truncated=[o.result.truncated for o in outcomes],
        **fence.binds(),
    )


async def fail_unbuildable_runs(conn: asyncpg.Connection, fence: Fence, errors: list[str]) -> set[UUID]:
    rows = await q.fetch(conn, "fail_unbuildable_runs", errors=errors, **fence.binds())
    return {r["id"] for r in rows}


async def renew_dispatch_leases(conn: asyncpg.Connection, fence: Fence, lease_seconds: float) -> set[UUID]:
    rows = await q.fetch(conn, "renew_dispatch_leases", lease_seconds=lease_seconds, **fence.binds())
    return {r["id"] for r in rows}
