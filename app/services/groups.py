"""Groups of runs (fan-in): a batch makes one, runs join an open one, and once every run of it has
ended it completes, exactly once, in the transaction of its last run's end (migration 0024); what
completion owes (one run of a job, or one signed callback) is made by an engine's pass
(app.engine.groups). docs/groups-and-events.md."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from app.db import groups as group_repo
from app.db import jobs as job_repo
from app.errors import Conflict, InvalidInput, NotFound
from app.services.callbacks import validate_callback
from app.services.validation import check_payload

ENDED = ("succeeded", "failed", "cancelled", "expired")


@dataclass(frozen=True)
class GroupPlan:
    """The group a submission's runs go into: a new one (`new`) or an open one, checked."""

    id: uuid.UUID
    new: bool
    name: str | None = None
    on_complete: dict[str, Any] | None = None


@dataclass(frozen=True)
class Limits:
    allow_private_targets: bool
    max_payload_bytes: int
    max_payload_depth: int


async def plan(
    pool: asyncpg.Pool, tenant_id: str, spec: dict[str, Any], limits: Limits, *, may_create: bool
) -> GroupPlan:
    """The checked group of a submission's `group` field (`spec`, as its schema parsed it: `id`, or
    `name` and `on_complete`). Only a batch creates a group (`may_create`)."""
    if spec.get("id") is not None:
        if spec.get("name") is not None or spec.get("on_complete") is not None:
            raise InvalidInput(
                "group: give an open group's id, or a new group's name, not both", field="group"
            )
        group_id: uuid.UUID = spec["id"]
        async with pool.acquire() as conn:
            await open_group(conn, tenant_id, group_id)
        return GroupPlan(group_id, new=False)
    if not may_create:
        raise InvalidInput("group.id: a run joins an open group; a batch makes a new one", field="group.id")
    if spec.get("name") is None:
        raise InvalidInput("group: a new group needs a name (or give an open group's id)", field="group.name")
    on_complete = spec.get("on_complete")
    return GroupPlan(
        uuid.uuid4(),
        new=True,
        name=spec["name"],
        on_complete=None
        if on_complete is None
        else await _check_on_complete(pool, tenant_id, on_complete, limits),
    )


async def _check_on_complete(
    pool: asyncpg.Pool, tenant_id: str, raw: dict[str, Any], limits: Limits
) -> dict[str, Any]:
    field = "group.on_complete"
    job, callback = raw.get("job"), raw.get("callback")
    if (job is None) == (callback is None):
        raise InvalidInput(f"{field}: give exactly one of job and callback", field=field)
    if callback is not None:
        if raw.get("payload") is not None:
            raise InvalidInput(f"{field}.payload goes with job, not callback", field=f"{field}.payload")
        checked = await validate_callback(
            {"url": str(callback["url"])},
            field=f"{field}.callback",
            allow_private=limits.allow_private_targets,
        )
        assert checked is not None
        return {"callback": {"url": checked["url"]}}
    assert isinstance(job, str)
    payload = raw.get("payload") or {}
    check_payload(
        payload, limits.max_payload_bytes, max_depth=limits.max_payload_depth, field=f"{field}.payload"
    )
    async with pool.acquire() as conn:
        if await job_repo.get_job(conn, tenant_id, job) is None:
            raise InvalidInput(f"{field}.job: job {job!r} does not exist", field=f"{field}.job")
    return {"job": job, "payload": payload}


async def open_group(conn: asyncpg.Connection, tenant_id: str, group_id: uuid.UUID) -> None:
    """Refuses a group the runs cannot join: unknown (or another tenant's: not told apart), 422;
    completed, 409."""
    row = await group_repo.get_group(conn, tenant_id, group_id)
    if row is None:
        raise InvalidInput(f"group {group_id} does not exist", field="group.id")
    if row["completed_at"] is not None:
        raise Conflict(f"group {group_id} has completed; no run may join it", field="group.id")


async def record(conn: asyncpg.Connection, tenant_id: str, group: GroupPlan, created: int) -> None:
    """In the submission's transaction, after its runs are inserted with the group's id: counts them
    into the group (a new one is made with them). Joining, the group's row is locked after the runs'
    (the order a finisher takes them in); a group that completed meanwhile refuses them, and the
    caller's transaction rolls them back."""
    if group.new:
        await group_repo.insert_group(
            conn,
            id=group.id,
            tenant_id=tenant_id,
            name=group.name or "",
            on_complete=group.on_complete,
            total=created,
        )
        return
    if await group_repo.add_group_runs(conn, tenant_id, group.id, created) is None:
        await open_group(conn, tenant_id, group.id)
        raise Conflict(f"group {group.id} has completed; no run may join it", field="group.id")


def group_record(row: Any, callback: Any = None) -> dict[str, Any]:
    """A group as the API answers it (app.api.schemas.groups.Group)."""
    ended = sum(row[s] for s in ENDED)
    on_complete = row["on_complete"]
    state = None
    if on_complete is not None and "callback" in on_complete:
        state = {
            "url": on_complete["callback"]["url"],
            "status": callback["status"] if callback else None,
            "attempts": callback["attempts"] if callback else 0,
            "last_error": callback["last_error"] if callback else None,
        }
    return {
        "id": row["id"],
        "tenant_id": row["tenant_id"],
        "name": row["name"],
        "on_complete": on_complete,
        "total": row["total"],
        "pending": row["total"] - ended,
        **{s: row[s] for s in ENDED},
        "created_at": row["created_at"],
        "completed_at": row["completed_at"],
        "fired_at": row["fired_at"],
        "completion_run_id": row["completion_run_id"],
        "fire_error": row["fire_error"],
        "callback": state,
    }


async def get_group(pool: asyncpg.Pool, tenant_id: str, group_id: uuid.UUID) -> dict[str, Any]:
    async with pool.acquire() as conn:
        row = await group_repo.get_group(conn, tenant_id, group_id)
        if row is None:
            raise NotFound(f"group {group_id} not found", field="group_id")
        states = await group_repo.group_callback_states(conn, [group_id])
    return group_record(row, states.get(group_id))


async def list_groups(
    pool: asyncpg.Pool, tenant_id: str, cursor: tuple[datetime, uuid.UUID] | None, limit: int
) -> list[dict[str, Any]]:
    async with pool.acquire() as conn:
        rows = await group_repo.list_groups(conn, tenant_id, cursor, limit)
        states = await group_repo.group_callback_states(conn, [r["id"] for r in rows]) if rows else {}
    return [group_record(r, states.get(r["id"])) for r in rows]


def completion_payload(group: Any) -> dict[str, Any]:
    """The completion run's payload: on_complete.payload with `group` set to the group's counts."""
    summary = {
        "id": str(group["id"]),
        "name": group["name"],
        **{s: group[s] for s in ENDED},
        "total": group["total"],
    }
    return {**group["on_complete"].get("payload", {}), "group": summary}
