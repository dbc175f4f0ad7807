"""The cron materializer: turns each scheduled job's occurrences into runs ahead of time.

Each tick locks the jobs whose next fire falls within the horizon (SKIP LOCKED: engines split them),
applies the misfire policy to what was missed while no engine ran, inserts the missed and upcoming
occurrences (the unique (tenant, job, scheduled_at) index makes a double insert a no-op), and moves
next_fire_at past the horizon. Every time comes from the database's clock. A job with an overlap
policy is materialized when its occurrence is due, not ahead (the insert decides on the runs live
then); a job's jitter moves each occurrence's run by the occurrence's own offset."""

from __future__ import annotations

import logging
from datetime import timedelta

import asyncpg

from app import pending
from app.background import Periodic
from app.config import Settings
from app.db import cron as cron_repo
from app.db import runs as run_repo
from app.db import wakeups
from app.services import cron
from app.telemetry import metrics

log = logging.getLogger(__name__)
JOBS_PER_TICK = 200
OCCURRENCES_PER_JOB = 1000
_TICK = timedelta(microseconds=1)  # Postgres timestamps' resolution


class CronMaterializer(Periodic):
    name = "cron"

    def __init__(self, settings: Settings, pool: asyncpg.Pool, tick_seconds: float = 1.0):
        self.settings = settings
        self.pool = pool
        self.interval = tick_seconds

    async def step(self) -> int:
        horizon = timedelta(seconds=self.settings.cron_horizon_seconds)
        catchup = timedelta(seconds=self.settings.cron_catchup_seconds)
        quota = self.settings.tenant_max_pending
        inserted_total = 0
        hints: list[asyncpg.Record] = []
        # Room left under each tenant's backlog quota, counted once per tick: cron runs are admitted
        # like submitted ones, or 3,000 `* * * * *` jobs fill a backlog the API would refuse.
        room: dict[str, int] = {}
        async with self.pool.acquire() as conn, conn.transaction():
            for job in await cron_repo.lock_due_cron_jobs(conn, horizon.total_seconds(), JOBS_PER_TICK):
                tenant = job["tenant_id"]
                if tenant not in room:
                    room[tenant] = quota - await run_repo.count_pending_runs(conn, tenant, quota + 1)
                now = job["db_now"]
                # Overlap is decided as an occurrence's run is made: at its time, never ahead.
                ahead = horizon if job["overlap"] == "allow" else timedelta(0)
                missed, _ = cron.due_occurrences(
                    job["schedule"],
                    job["timezone"],
                    job["next_fire_at"],
                    now,
                    job["misfire"],
                    catchup,
                    OCCURRENCES_PER_JOB,
                )
                # From the stored next fire when it is still ahead (it is included), else from now.
                start = max(now, job["next_fire_at"] - _TICK)
                upcoming = cron.occurrences_between(
                    job["schedule"], job["timezone"], start, now + ahead, OCCURRENCES_PER_JOB
                )
                occurrences = missed + upcoming
                allowed = max(room[tenant], 0)
                if len(occurrences) > allowed:
                    # Skipped, never silently lost: counted and logged; next_fire_at moves past them.
                    skipped = occurrences[allowed:]
                    occurrences = occurrences[:allowed]
                    metrics.cron_occurrences_skipped_total.labels("quota").inc(len(skipped))
                    log.warning(
                        "cron job %s/%s: %d occurrence(s) from %s skipped, tenant at its backlog quota of %d",
                        tenant,
                        job["name"],
                        len(skipped),
                        skipped[0].isoformat(),
                        quota,
                    )
                # A capped list stops short of the horizon: the next tick continues where this one
                # stopped, rather than jumping past the horizon and losing the rest.
                until = upcoming[-1] if len(upcoming) == OCCURRENCES_PER_JOB else now + ahead
                next_fire_at = cron.next_fire(job["schedule"], job["timezone"], until)
                at = [cron.jittered(tenant, job["name"], o, job["jitter_seconds"]) for o in occurrences]
                rows = await cron_repo.insert_cron_runs(conn, tenant, job["name"], at)
                inserted = [r for r in rows if r["id"] is not None]
                overlapped = sum(r["overlapped"] for r in rows)
                if overlapped:
                    metrics.cron_occurrences_skipped_total.labels("overlap").inc(overlapped)
                room[tenant] -= len(inserted)
                await cron_repo.set_next_fire(conn, job["tenant_id"], job["name"], next_fire_at)
                inserted_total += len(inserted)
                hints += inserted
                due_now = [r["scheduled_at"] for r in inserted if r["scheduled_at"] <= now]
                if due_now:
                    await wakeups.notify_runs_due(conn, min(due_now))
        await pending.runs_pending(hints)
        if inserted_total:
            metrics.cron_runs_materialized_total.inc(inserted_total)
        return inserted_total
