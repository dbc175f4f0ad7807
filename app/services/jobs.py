"""Job definitions: validation of target, schedule and time zone, and the first next fire."""

from __future__ import annotations

from typing import Any

import asyncpg

from app.db import jobs as job_repo
from app.services import cron
from app.services.targets import validate_target
from app.services.validation import check_payload


async def put_job(
    pool: asyncpg.Pool,
    tenant_id: str,
    name: str,
    fields: dict[str, Any],
    *,
    allow_private_targets: bool,
    max_payload_bytes: int,
) -> tuple[asyncpg.Record, bool]:
    """Upsert a job; returns (row, created). Changing the schedule recomputes next_fire_at."""
    target = await validate_target(fields["target"], allow_private=allow_private_targets)
    check_payload(fields["payload"], max_payload_bytes, field="payload")
    schedule = fields["schedule"]
    cron.validate_timezone(fields["timezone"])
    if schedule is not None:
        cron.validate_schedule(schedule)
    async with pool.acquire() as conn, conn.transaction():
        next_fire_at = None
        if schedule is not None and not fields["paused"]:
            # The database's clock decides when things are due, never this node's.
            next_fire_at = cron.next_fire(schedule, fields["timezone"], await job_repo.db_now(conn))
        row = await job_repo.upsert_job(
            conn, tenant_id, name, **{**fields, "target": target, "next_fire_at": next_fire_at}
        )
    return row, bool(row["inserted"])
