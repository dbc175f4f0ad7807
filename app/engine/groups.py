"""Firing completed groups: what a group's completion owes (one run of `on_complete.job`, or one
signed callback) is made here, once, whatever crashes.

A group completes in the transaction that ends its last run (a trigger, migration 0024), which is
where exactly-once is decided. This pass then takes the completed groups still owed, each under its
row lock (SKIP LOCKED: engines split them), and in that transaction queues the callback in the
outbox, or records the run it submitted, and sets `fired_at`. The run is submitted like any
(quota, holds, the job's rules) with the idempotency key `group:<id>`: an engine killed between the
run's commit and `fired_at`'s leaves the group owed, and the next pass's submission is answered with
that same run. A tenant over its backlog quota gets the run later (tried again every
DEFER_SECONDS, the refusal shown as the group's fire_error); a job deleted since is given up on,
with fire_error saying so. Every POLL_SECONDS (about that long after completion). A group fired
longer ago than RETENTION_DAYS is deleted, as its runs' days are.
"""

from __future__ import annotations

import logging

import asyncpg

from app.background import AGAIN, Periodic, Wait
from app.config import Settings
from app.db import groups as group_repo
from app.errors import Conflict, InvalidInput, OverQuota
from app.services.admission import AdmissionControl
from app.services.groups import completion_payload
from app.services.run_requests import RunRequest
from app.services.submission import submit

log = logging.getLogger(__name__)
BATCH = 100
POLL_SECONDS = 1.0
DEFER_SECONDS = 5.0
PRUNE_BATCH = 10_000


class GroupFirer(Periodic):
    name = "groups"

    def __init__(self, settings: Settings, pool: asyncpg.Pool):
        self.settings = settings
        self.pool = pool
        self.interval = POLL_SECONDS
        self.admission = AdmissionControl(settings.tenant_max_pending)

    async def step(self) -> Wait | None:
        """A batch of the groups owed; a full one means more are: the next step at once."""
        return AGAIN if await self.fire_once() == BATCH else None

    async def fire_once(self) -> int:
        """Fires the completed groups still owed (a batch); how many were fired or deferred."""
        async with self.pool.acquire() as conn, conn.transaction():
            groups = await group_repo.claim_completed_groups(conn, BATCH)
            for group in groups:
                await self._fire(conn, group)
        return len(groups)

    async def _fire(self, conn: asyncpg.Connection, group: asyncpg.Record) -> None:
        on_complete = group["on_complete"]
        if on_complete is None:
            await group_repo.fire_group(conn, group["id"], None, None)
        elif "callback" in on_complete:
            await group_repo.insert_group_callback(conn, group, on_complete["callback"]["url"])
            await group_repo.fire_group(conn, group["id"], None, None)
        else:
            request = RunRequest(
                on_complete["job"], None, completion_payload(group), f"group:{group['id']}", "on_complete."
            )
            try:
                [made] = await submit(self.pool, self.admission, group["tenant_id"], [request], None)
            except OverQuota as exc:
                await group_repo.defer_group(conn, group["id"], DEFER_SECONDS, exc.message)
                return
            except Conflict:  # the same key in flight: another pass is submitting it
                return
            except InvalidInput as exc:  # its job was deleted (or the key taken with another body)
                log.warning("group %s: its completion run cannot be made: %s", group["id"], exc.message)
                await group_repo.fire_group(conn, group["id"], None, exc.message)
                return
            await group_repo.fire_group(conn, group["id"], made.run["id"], None)
        log.info("group %s completed and fired", group["id"])


class GroupPruner(Periodic):
    """Deletes groups fired longer ago than the runs' history is kept (RETENTION_DAYS)."""

    name = "groups_prune"

    def __init__(self, settings: Settings, pool: asyncpg.Pool):
        self.settings = settings
        self.pool = pool
        self.interval = settings.maintenance_interval_seconds

    async def step(self) -> int:
        """A batch of them; how many."""
        async with self.pool.acquire() as conn:
            return await group_repo.delete_old_groups(conn, self.settings.retention_days, PRUNE_BATCH)
