"""What the dashboard shows beyond the API's own reads: the Overview's figures and failures grouped
by job and error. `tenant_id` None is the admin (every tenant); scoping is in the statements."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from app.db import dashboard as dashboard_repo
from app.db import flow as flow_repo
from app.db import runs as run_repo
from app.domain import RunStatus
from app.services import runs as run_service

CHART_MINUTES = 60
HELD_LIMIT = 100_000  # held runs per reason are counted up to this (the page says "or more")
LATENESS_LIMIT = 10_000  # the runs a late run waits behind are counted up to this
# A due run anywhere waiting this long means the engines are not claiming (none runs, or all are
# behind): an engine claims every due run within a poll (a second) while it keeps up.
STALLED_SECONDS = 60.0


@dataclass(frozen=True)
class OldestDue:
    run_id: uuid.UUID
    tenant_id: str
    job: str
    due_at: datetime
    waiting_seconds: float


@dataclass(frozen=True)
class Overview:
    """Over runs scheduled in the last hour, except `oldest_due`, which is any pending run."""

    counts: dict[str, int]  # every status, zeros included, in the order of RunStatus
    per_minute: list[int]  # runs finished in each of the last CHART_MINUTES minutes, oldest first
    due_lag_p50: float | None
    due_lag_p99: float | None
    oldest_due: OldestDue | None
    held: dict[str, int]  # pending runs held back now, by reason (paused, concurrency), any age

    @property
    def recent_per_second(self) -> float:
        """Runs finished per second over the last five minutes (the current one included)."""
        recent = self.per_minute[-5:]
        return sum(recent) / (60 * len(recent)) if recent else 0.0

    @property
    def failure_ratio(self) -> float | None:
        ended = self.counts[RunStatus.SUCCEEDED] + self.counts[RunStatus.FAILED]
        return self.counts[RunStatus.FAILED] / ended if ended else None


@dataclass(frozen=True)
class FailureGroup:
    job: str
    error: str | None
    runs: int
    latest: datetime | None
    newest_id: uuid.UUID


async def overview(pool: asyncpg.Pool, tenant_id: str | None) -> Overview:
    async with pool.acquire() as conn:
        counts = await dashboard_repo.status_counts(conn, tenant_id)
        timings = await dashboard_repo.timings(conn, tenant_id, CHART_MINUTES)
        oldest = await dashboard_repo.oldest_due_pending(conn, tenant_id)
        held = await flow_repo.count_held_runs(conn, HELD_LIMIT, tenant_id)
    lag = timings["due_lag"] or [None, None]
    return Overview(
        counts={s.value: counts.get(s.value, 0) for s in RunStatus},
        per_minute=[int(n) for n in timings["per_minute"]],
        due_lag_p50=lag[0],
        due_lag_p99=lag[1],
        oldest_due=None
        if oldest is None
        else OldestDue(
            oldest["id"],
            oldest["tenant_id"],
            oldest["job"],
            oldest["due_at"],
            oldest["waiting"].total_seconds(),
        ),
        held=held,
    )


async def failure_groups(pool: asyncpg.Pool, tenant_id: str, days: int, limit: int) -> list[FailureGroup]:
    """The tenant's failed runs of the last `days` days by (job, error), most frequent first."""
    async with pool.acquire() as conn:
        rows = await dashboard_repo.failure_groups(conn, tenant_id, days, limit)
    return [FailureGroup(r["job"], r["last_error"], r["runs"], r["latest"], r["newest_id"]) for r in rows]


@dataclass(frozen=True)
class Lateness:
    late_seconds: float  # how long past its due time the run is
    reasons: list[str]  # in plain words, the likeliest first


def _runs(n: int) -> str:
    more = "+" if n >= LATENESS_LIMIT else ""
    return f"{n}{more} run{'' if n == 1 else 's'}"


async def why_late(
    pool: asyncpg.Pool, run_id: uuid.UUID, tenant_id: str | None, max_pending: int
) -> Lateness | None:
    """Why a pending run whose due time has passed is not running, from what the database knows:
    held by a pause (its job's, its tenant's), by its concurrency limit (slots taken of the limit,
    runs of its key before it) or its tenant's max_in_flight (slots taken of it), or by its rate
    limit (starts in its key's window, when the window has room, runs of its key before it),
    waiting behind the tenant's runs the claim takes first, the tenant's backlog at its quota
    (`max_pending`), or no engine claiming at all. None when the run is not pending or not yet due;
    NotFound when it is not `tenant_id`'s (None: the admin, any)."""
    async with pool.acquire() as conn:
        row = await run_repo.run_lateness(conn, run_id, tenant_id, LATENESS_LIMIT)
    if row is None:
        await run_service.get_run(pool, run_id, tenant_id)  # NotFound if it is not the tenant's
        return None
    late_seconds = float(row["late_seconds"])
    if late_seconds <= 0:
        return None
    async with pool.acquire() as conn:
        backlog = await run_repo.count_pending_runs(conn, row["tenant_id"], max_pending)
        stalled = await dashboard_repo.oldest_due_pending(conn, None)
    reasons = []
    if row["held"] == "paused":
        paused = [
            what
            for what, is_paused in (("its job", row["job_paused"]), ("its tenant", row["tenant_paused"]))
            if is_paused
        ]
        reasons.append(
            f"Held: {' and '.join(paused) or 'its job or tenant'} "
            f"{'are' if len(paused) == 2 else 'is'} paused; it runs once resumed."
        )
    elif row["held"] == "concurrency" and row["concurrency_limit"] is None and row["max_in_flight"]:
        # A run of a job without a limit of its own waits only for its tenant's slot.
        reasons.append(
            f"Held by its tenant's max_in_flight: {row['tenant_in_flight']} in flight of "
            f"{row['max_in_flight']}, and {_runs(row['key_waiting_before'])} of its job waiting before it."
        )
    elif row["held"] == "concurrency":
        limit = row["concurrency_limit"]
        key = f" (key {row['concurrency_key']!r})" if row["concurrency_key"] else ""
        reasons.append(
            f"Held by its job's concurrency limit{key}: {row['key_in_flight']} in flight of a limit of "
            f"{limit if limit is not None else 'none'}, and {_runs(row['key_waiting_before'])} of the "
            "same key waiting before it."
        )
    elif row["held"] == "rate_limit":
        key = f" (key {row['concurrency_key']!r})" if row["concurrency_key"] else ""
        limit, period, room_at = row["rate_limit"], row["rate_period"], row["key_next_at"]
        room = f"; its window has room at {room_at:%H:%M:%S} UTC" if room_at is not None else ""
        reasons.append(
            f"Held by its job's rate limit{key}: {row['key_in_window']} started or about to start in "
            f"the last {period or 0:g} s, of a limit of {limit if limit is not None else 'none'}{room}, "
            f"and {_runs(row['key_waiting_before'])} of the same key waiting before it."
        )
    if (
        row["held"] in ("concurrency", "rate_limit")
        and row["max_in_flight"] is not None
        and (row["concurrency_limit"] is not None or row["held"] == "rate_limit")
    ):
        reasons.append(
            f"Its tenant's max_in_flight applies too: {row['tenant_in_flight']} in flight of "
            f"{row['max_in_flight']}."
        )
    if row["held"] is None and row["due_before"]:
        reasons.append(
            f"Waiting behind {_runs(row['due_before'])} of the tenant due before it "
            "(a higher priority, or the same priority and due earlier)."
        )
    if backlog >= max_pending:
        reasons.append(
            f"The tenant's backlog is at its quota of {max_pending} pending runs (new runs are refused)."
        )
    waited = stalled["waiting"].total_seconds() if stalled is not None else 0.0
    if row["held"] is None and waited >= STALLED_SECONDS:
        reasons.append(
            f"No engine has claimed a due run for at least {waited:.0f} s (the oldest due run of the "
            "scheduler has waited that long): no engine is running, or all are behind."
        )
    if not reasons:
        reasons.append("Nothing holds it back: an engine should claim it within a few seconds.")
    return Lateness(late_seconds, reasons)
