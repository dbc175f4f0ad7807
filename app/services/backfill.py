"""Backfill: a cron job's occurrences in a range made into runs, each at most once however often it
is asked, under the tenant's backlog quota like a submission (docs/runs.md)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from app import pending
from app.db import cron as cron_repo
from app.db import runs as run_repo
from app.db import wakeups
from app.domain import RunRecord, run_record
from app.errors import Conflict, InvalidInput, NotFound
from app.services import audit as audit_log
from app.services import cron
from app.services.admission import AdmissionControl
from app.services.audit import AuditContext
from app.services.runs import admitted

# Occurrences one request may ask for: one statement makes them, as a batch of submissions.
MAX_BACKFILL = 1000
_TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class Backfilled:
    runs: list[RunRecord]  # made by this request, oldest first
    existing: int  # occurrences whose run existed already


async def backfill(
    pool: asyncpg.Pool,
    admission: AdmissionControl,
    tenant_id: str,
    name: str,
    start: datetime,
    end: datetime,
    *,
    audit: AuditContext,
) -> Backfilled:
    """The job's occurrences in [start, end) as runs, each at its jittered time (as the materializer
    makes it, so the unique (tenant_id, job, scheduled_at) index finds the ones that exist, whoever
    made them). Held if the job or tenant is paused, in the insert. The runs to be made count
    against the tenant's backlog quota (OverQuota, nothing written); the job's overlap policy does
    not apply: a backfill asks for these occurrences."""
    if start >= end:
        raise InvalidInput("to must be later than from", field="to")
    async with pool.acquire() as conn, conn.transaction():
        job = await cron_repo.lock_job_for_backfill(conn, tenant_id, name)
        if job is None:
            raise NotFound(f"job {name!r} not found", field="name")
        if job["schedule"] is None:
            raise Conflict(f"job {name!r} has no schedule: only a cron job has occurrences", field="schedule")
        # (start - tick, end - tick] is [start, end) at the timestamps' resolution.
        nominal = cron.occurrences_between(
            job["schedule"], job["timezone"], start - _TICK, end - _TICK, MAX_BACKFILL + 1
        )
        if len(nominal) > MAX_BACKFILL:
            raise InvalidInput(
                f"[from, to) holds more than {MAX_BACKFILL} occurrences of the schedule: end it at "
                f"{nominal[-1].isoformat()} at the latest, and ask for the rest in another request",
                field="to",
            )
        asked = {"from": start.isoformat(), "to": end.isoformat()}
        if not nominal:
            await audit_log.record(
                conn, audit, tenant_id, "job.backfilled", f"job:{name}", {**asked, "runs": 0, "existing": 0}
            )
            return Backfilled([], 0)
        at = [cron.jittered(tenant_id, name, o, job["jitter_seconds"]) for o in nominal]
        # Only the runs to be made count: asking again for a range already made is answered at quota too.
        adding = len(at) - len(await cron_repo.existing_cron_runs(conn, tenant_id, name, at))
        quota = admitted(admission, tenant_id, conn, adding) if adding else contextlib.nullcontext()
        async with quota:
            rows = await cron_repo.insert_cron_runs(conn, tenant_id, name, at, backfill=True)
        made = [r["id"] for r in rows if r["id"] is not None]
        runs = sorted(await run_repo.get_runs(conn, made), key=lambda r: r["scheduled_at"]) if made else []
        # A held run is hinted when it is released, as any other.
        claimable = [r for r in runs if r["held"] is None]
        due = [r["scheduled_at"] for r in claimable if r["due_at"] <= r["created_at"]]
        if due:
            await wakeups.notify_runs_due(conn, min(due))
        counts = {"runs": len(made), "existing": len(rows) - len(made)}
        await audit_log.record(conn, audit, tenant_id, "job.backfilled", f"job:{name}", {**asked, **counts})
    await pending.runs_pending(claimable)
    return Backfilled([run_record(r) for r in runs], len(rows) - len(made))
