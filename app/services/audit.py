"""The audit log: who changed what, through the API or the dashboard.

Every service that makes a change takes an AuditContext (who asks, under which request id) and calls
`record` inside the transaction that makes the change, so the event commits with the change or not
at all. Runs a client submits are not events; a run a dashboard user triggers is. An event's detail
is bounded and never holds a payload or a secret: names, numbers, times, and a bulk action's filter
and counts. A bulk action is one event whatever its number of chunks (BulkEvent)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import asyncpg

from app.db import audit as audit_repo
from app.db import tenants as tenant_repo
from app.errors import NotFound

ActorType = Literal["key", "admin", "session"]
# What the log records, the listing's `action` filter (docs/audit.md has what each means).
ACTIONS = (
    "tenant.created",
    "tenant.paused",
    "tenant.resumed",
    "tenant.patched",
    "key.created",
    "key.revoked",
    "signing_secret.rotated",
    "job.put",
    "job.deleted",
    "job.paused",
    "job.resumed",
    "job.triggered",
    "job.backfilled",
    "run.cancelled",
    "run.retried",
    "run.rescheduled",
    "runs.bulk_cancelled",
    "runs.bulk_retried",
)
# A caller's X-Request-ID is kept when it is this; otherwise the API makes one (app.api.server).
REQUEST_ID = re.compile(r"[A-Za-z0-9._:/+=-]{1,128}")
# A bulk filter's run ids are listed up to this many; more are counted.
MAX_LISTED_IDS = 20
# A bulk filter's error text (a Failures group's) is kept to this many characters.
MAX_ERROR_CHARS = 200


@dataclass(frozen=True)
class Actor:
    """A tenant's API key (`id` its key id, never the secret), the admin token (`id` "admin"), or a
    dashboard session (`id` the session's, `key_id` the key it signed in with; None: the admin token)."""

    type: ActorType
    id: str
    key_id: str | None = None


@dataclass(frozen=True)
class AuditContext:
    actor: Actor
    request_id: str


def new_request_id() -> str:
    return uuid.uuid4().hex


async def record(
    conn: asyncpg.Connection,
    ctx: AuditContext,
    tenant_id: str,
    action: str,
    target: str,
    detail: dict[str, Any] | None = None,
) -> tuple[datetime, uuid.UUID]:
    """Appends the event to the tenant's log in the caller's transaction; returns its key (at, id)."""
    assert action in ACTIONS, action
    assert conn.is_in_transaction(), "an audit event is written in its change's transaction"
    return await audit_repo.insert_event(
        conn,
        tenant_id,
        actor_type=ctx.actor.type,
        actor_id=ctx.actor.id,
        actor_key_id=ctx.actor.key_id,
        action=action,
        target=target,
        request_id=ctx.request_id,
        detail=detail or {},
    )


async def triggered(
    conn: asyncpg.Connection, ctx: AuditContext, tenant_id: str, runs: list[tuple[Mapping[str, Any], bool]]
) -> None:
    """job.triggered for each (run, created) a dashboard user's "Run now" answered with."""
    for run, created in runs:
        detail = {"run_id": str(run["id"]), "created": created}
        await record(conn, ctx, tenant_id, "job.triggered", f"job:{run['job']}", detail)


class BulkEvent:
    """A bulk action's one event. Its chunks commit one by one, so the event is written by the first
    transaction that changes runs and its counts are updated by each later one (`changed`): whatever
    committed is counted, and nothing that rolled back. `finish` records the matched count, or the
    whole event when no chunk changed anything."""

    def __init__(self, ctx: AuditContext, tenant_id: str, action: str, detail: dict[str, Any]):
        self.ctx = ctx
        self.tenant_id = tenant_id
        self.action = action
        self.detail = {**detail, "matched": 0, "changed": 0}
        self.key: tuple[datetime, uuid.UUID] | None = None

    async def changed(self, conn: asyncpg.Connection, runs: int, matched: int) -> None:
        """In the transaction that changed `runs` runs, `matched` having been looked at so far."""
        self.detail["changed"] += runs
        self.detail["matched"] = matched
        await self._write(conn)

    async def finish(self, pool: asyncpg.Pool, matched: int) -> None:
        if self.key is not None and self.detail["matched"] == matched:
            return
        self.detail["matched"] = matched
        async with pool.acquire() as conn, conn.transaction():
            await self._write(conn)

    async def _write(self, conn: asyncpg.Connection) -> None:
        if self.key is None:
            self.key = await record(conn, self.ctx, self.tenant_id, self.action, "runs", self.detail)
        else:
            await audit_repo.update_detail(conn, self.tenant_id, *self.key, self.detail)


def bulk_filter(filter_: dict[str, Any]) -> dict[str, Any]:
    """A bulk action's filter as the event keeps it: the criteria given, its run ids listed up to
    MAX_LISTED_IDS (more are counted), an error text cut to MAX_ERROR_CHARS."""
    kept = {k: v for k, v in filter_.items() if v is not None}
    ids = kept.get("ids")
    if ids is not None:
        kept["ids"] = [str(i) for i in ids] if len(ids) <= MAX_LISTED_IDS else f"{len(ids)} ids"
    if "error" in kept:
        kept["error"] = [e[:MAX_ERROR_CHARS] if e is not None else None for e in kept["error"]]
    return kept


@dataclass(frozen=True)
class Event:
    at: datetime
    id: uuid.UUID
    actor: Actor
    action: str
    target: str
    request_id: str
    detail: dict[str, Any]


async def list_events(
    pool: asyncpg.Pool,
    tenant_id: str,
    *,
    action: str | None,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[Event]:
    """The tenant's events newest first, from after `after` ((at, id) of the previous page's last)."""
    async with pool.acquire() as conn:
        rows = await audit_repo.list_events(conn, tenant_id, action, after, limit)
        if not rows and not await tenant_repo.tenant_exists(conn, tenant_id):
            raise NotFound(f"tenant {tenant_id!r} not found", field="tenant_id")
    return [
        Event(
            r["at"],
            r["id"],
            Actor(r["actor_type"], r["actor_id"], r["actor_key_id"]),
            r["action"],
            r["target"],
            r["request_id"],
            r["detail"],
        )
        for r in rows
    ]
