"""What the dashboard shows beyond the API's own reads: the Overview's figures and failures grouped
by job and error. `tenant_id` None is the admin (every tenant); scoping is in the statements."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from app.db import dashboard as dashboard_repo
from app.domain import RunStatus

CHART_MINUTES = 60


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
    )


async def failure_groups(pool: asyncpg.Pool, tenant_id: str, days: int, limit: int) -> list[FailureGroup]:
    """The tenant's failed runs of the last `days` days by (job, error), most frequent first."""
    async with pool.acquire() as conn:
        rows = await dashboard_repo.failure_groups(conn, tenant_id, days, limit)
    return [FailureGroup(r["job"], r["last_error"], r["runs"], r["latest"], r["newest_id"]) for r in rows]
