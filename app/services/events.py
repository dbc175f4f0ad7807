"""Events (fan-out): an event submits one run of every job of the tenant subscribed to it (the job's
`on_events`), in one submission: one transaction, all or nothing, admitted as that many runs.

An Idempotency-Key makes each run's own key `<key>:<job>`: a repeat with the same body answers the
same runs through the run submission's idempotency (app.services.run_requests), and with another
body is 422. docs/groups-and-events.md."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import asyncpg

from app.config import Settings
from app.db import groups as group_repo
from app.errors import InvalidInput
from app.services.admission import AdmissionControl
from app.services.run_requests import RunRequest, Submitted
from app.services.submission import submit
from app.services.validation import check_payload
from app.services.wakeups import WakeUps

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")  # as a job's name
NAME_RULE = "1 to 128 characters from A-Z a-z 0-9 _ . : -, starting with a letter or digit"


def valid_name(name: str) -> bool:
    return NAME.fullmatch(name) is not None


@dataclass(frozen=True)
class Publication:
    """An event as a tenant publishes it: its name and payload as sent, the Idempotency-Key header,
    the caller's traceparent."""

    tenant_id: str
    name: str
    payload: Any | None
    idempotency_key: str | None
    traceparent: str | None


class Publisher:
    """Publishes tenants' events: built once per process, as the Submitter is, and called the same
    way; it checks what it is given (a refusal is an InvalidInput naming the field) before writing."""

    def __init__(self, settings: Settings, pool: asyncpg.Pool, admission: AdmissionControl, wakeups: WakeUps):
        self.settings, self.pool, self.admission, self.wakeups = settings, pool, admission, wakeups

    async def publish(self, event: Publication) -> list[Submitted]:
        """The runs the event made (or, replayed, made before), in job name order; none when no job
        subscribes. A payload of None: each job's own."""
        if not valid_name(event.name):
            raise InvalidInput(f"event name {event.name[:64]!r} is not valid: {NAME_RULE}", field="name")
        if event.payload is not None:
            s = self.settings
            check_payload(event.payload, s.max_payload_bytes, max_depth=s.max_payload_depth, field="payload")
        async with self.pool.acquire() as conn:
            jobs = await group_repo.subscribed_jobs(conn, event.tenant_id, event.name)
        if not jobs:
            return []
        key = event.idempotency_key
        requests = [
            RunRequest(job, None, event.payload, None if key is None else f"{key}:{job}", "") for job in jobs
        ]
        return await submit(
            self.pool, self.admission, event.tenant_id, requests, event.traceparent, self.wakeups
        )
