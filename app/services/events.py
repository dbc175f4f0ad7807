"""Events (fan-out): an event submits one run of every job of the tenant subscribed to it (the job's
`on_events`), in one submission: one transaction, all or nothing, admitted as that many runs.

An Idempotency-Key makes each run's own key `<key>:<job>`: a repeat with the same body answers the
same runs through the run submission's idempotency (app.services.run_requests), and with another
body is 422. docs/groups-and-events.md."""

from __future__ import annotations

import re
from typing import Any

import asyncpg

from app.db import groups as group_repo
from app.services.admission import AdmissionControl
from app.services.run_requests import RunRequest, Submitted
from app.services.submission import submit
from app.services.wakeups import WakeUps

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")  # as a job's name
NAME_RULE = "1 to 128 characters from A-Z a-z 0-9 _ . : -, starting with a letter or digit"


def valid_name(name: str) -> bool:
    return NAME.fullmatch(name) is not None


async def publish(
    pool: asyncpg.Pool,
    admission: AdmissionControl,
    tenant_id: str,
    event: str,
    payload: Any | None,
    idempotency_key: str | None,
    traceparent: str | None,
    wakeups: WakeUps | None = None,
) -> list[Submitted]:
    """The runs the event made (or, replayed, made before), in job name order; none when no job
    subscribes. `payload` None: each job's own."""
    async with pool.acquire() as conn:
        jobs = await group_repo.subscribed_jobs(conn, tenant_id, event)
    if not jobs:
        return []
    requests = [
        RunRequest(job, None, payload, None if idempotency_key is None else f"{idempotency_key}:{job}", "")
        for job in jobs
    ]
    return await submit(pool, admission, tenant_id, requests, traceparent, wakeups)
