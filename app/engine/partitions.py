"""Partition maintenance, by one leader at a time (a session advisory lock).

Premakes daily partitions ahead, moves rows stranded in DEFAULT into their day's new partition, and
ages out days past retention with DETACH + DROP, never a DELETE, and only days whose runs are all
terminal. A day that still holds unfinished runs is kept and reported (metric + log): nothing is lost.
Between passes it keeps busy partitions' planner statistics fresh.

Every day of the runs has its day of run_tags (the runs' tags, migration 0022), made once the runs'
day exists and dropped once it has gone, each in a transaction of its own: listings and inserts
take both tables, and DDL that held one while it waited for the other could deadlock with them.

The audit log (audit_events, migration 0026) has its days made the same way, and those older than
SCHEDULER_AUDIT_RETENTION_DAYS dropped whole: an event is history only, nothing waits on it.

A new day is a standalone table ATTACHed to the parent (migration 0002), which claims neither wait
for nor block: they prune DEFAULT and future days at plan time. Moving stranded rows and retiring a
day need the parent exclusively. All DDL runs with a short lock_timeout and is retried, so a DDL
waiting for a lock holds the claims queued behind it up for at most that long.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, date, timedelta

import asyncpg

from app.background import Led, Periodic
from app.config import Settings
from app.db import dependencies as dependencies_repo
from app.db import jobs as job_repo
from app.db import locks
from app.db import partitions as repo
from app.telemetry import metrics

log = logging.getLogger(__name__)
# A DDL waiting for a lock queues every later conflicting statement behind it (every claim, when it
# waits for the parent): it waits at most this long, then steps aside and tries again.
LOCK_TIMEOUT_SECONDS = 2.0
DDL_TRIES = 5
# Conditions that pass, so the step is simply tried again: a lock another session holds, a row that
# reached DEFAULT for the very day being attached (ATTACH refuses; the retry moves it), a deadlock
# with an ad-hoc session.
TRANSIENT = (asyncpg.LockNotAvailableError, asyncpg.DeadlockDetectedError, asyncpg.CheckViolationError)


Report = dict[str, list[str]]


class PartitionMaintenance(Led[Report]):
    name = "partitions"
    leader = locks.PARTITIONS_LOCK_KEY

    def __init__(
        self,
        settings: Settings,
        pool: asyncpg.Pool,
        *,
        lock_timeout_seconds: float = LOCK_TIMEOUT_SECONDS,
        ddl_tries: int = DDL_TRIES,
    ):
        self.settings = settings
        self.pool = pool
        self.interval = settings.maintenance_interval_seconds
        self.lock_timeout = f"{round(lock_timeout_seconds * 1000)}ms"
        self.ddl_tries = ddl_tries

    async def _ddl(
        self, conn: asyncpg.Connection, step: Callable[[], Awaitable[str]], what: str
    ) -> str | None:
        for attempt in range(1, self.ddl_tries + 1):
            try:
                async with conn.transaction():
                    await repo.set_lock_timeout(conn, self.lock_timeout)
                    return await step()
            except TRANSIENT as exc:
                if attempt == self.ddl_tries:
                    break
                log.info("partition %s: %s (try %d); retrying", what, _reason(exc), attempt)
                await asyncio.sleep(0.2 * 2 ** (attempt - 1))
        log.warning("partition %s: gave up after %d tries; next pass will retry", what, self.ddl_tries)
        return None

    async def lead(self, conn: asyncpg.Connection) -> Report:
        """One pass; returns what it did, by day, for logs and tests."""
        report: Report = {"created": [], "kept": [], "dropped": [], "tags": [], "audit": []}
        today = (await job_repo.db_now(conn)).astimezone(UTC).date()
        wanted = [today + timedelta(days=n) for n in range(-1, self.settings.premake_days + 1)]
        # Past days with rows stranded in DEFAULT get their partition too (the rows move with it).
        # Future days beyond the premade window do not: their rows wait in DEFAULT and move when
        # their day is premade, so the partition count is set by the calendar, not by tenants.
        wanted += [d for d in await repo.default_partition_days(conn, wanted[0]) if d not in wanted]
        existing = set(await repo.list_day_partitions(conn))
        for day in sorted(set(wanted) - existing):
            result = await self._ddl(conn, _bind(repo.create_day_partition, conn, day), f"create {day}")
            if result and result != "exists":
                report["created"].append(f"{day}: {result}")
                log.info("partition %s: %s", day, result)

        await self._follow_with_tags(conn, report)  # the new days get theirs (before any retires)

        cutoff = today - timedelta(days=self.settings.retention_days)
        at_risk = 0
        for day in await repo.list_day_partitions(conn):
            if day >= cutoff:
                continue
            result = await self._ddl(conn, _bind(repo.retire_day_partition, conn, day), f"retire {day}")
            if result == "dropped":
                await dependencies_repo.forget_day(conn, day)  # the day's runs' edges go with them
                report["dropped"].append(str(day))
            elif result == "kept":
                at_risk += 1
                report["kept"].append(str(day))
                log.warning(
                    "partition %s is past retention but holds unfinished runs; kept, not dropped", day
                )
        metrics.partitions_at_risk.set(at_risk)
        await self._follow_with_tags(conn, report)  # the retired days' tags go
        await self._audit_days(conn, report, today, wanted[0])
        metrics.partitions_total.set(len(await repo.list_day_partitions(conn)))
        metrics.default_partition_rows.set(await repo.count_default_rows(conn))
        return report

    async def _follow_with_tags(self, conn: asyncpg.Connection, report: Report) -> None:
        """Makes run_tags' day for every day of job_runs, moving the day's tags stranded in DEFAULT
        into it, and drops run_tags' days whose runs' day is gone."""
        days = set(await repo.list_day_partitions(conn))
        tag_days = set(await repo.list_day_partitions(conn, "run_tags"))
        steps = {day: repo.create_tags_day_partition for day in days - tag_days}
        steps |= {day: repo.drop_tags_day_partition for day in tag_days - days}
        for day in sorted(steps):
            result = await self._ddl(conn, _bind(steps[day], conn, day), f"tags {day}")
            if result and result not in ("exists", "absent"):
                report["tags"].append(f"{day}: {result}")
                log.info("tags partition %s: %s", day, result)

    async def _audit_days(
        self, conn: asyncpg.Connection, report: dict[str, list[str]], today: date, first: date
    ) -> None:
        """Makes audit_events' days from yesterday to the premade horizon (and past days with events
        stranded in DEFAULT), and drops the days past SCHEDULER_AUDIT_RETENTION_DAYS."""
        wanted = {today + timedelta(days=n) for n in range(-1, self.settings.premake_days + 1)}
        wanted |= set(await repo.audit_default_days(conn, first))
        existing = set(await repo.list_day_partitions(conn, "audit_events"))
        cutoff = today - timedelta(days=self.settings.audit_retention_days)
        steps = {day: repo.create_audit_day_partition for day in wanted - existing if day >= cutoff}
        steps |= {day: repo.drop_audit_day_partition for day in existing if day < cutoff}
        for day in sorted(steps):
            result = await self._ddl(conn, _bind(steps[day], conn, day), f"audit {day}")
            if result and result not in ("exists", "absent"):
                report["audit"].append(f"{day}: {result}")
                log.info("audit partition %s: %s", day, result)


class PartitionStatistics(Periodic):
    """Keeps busy partitions' planner statistics fresh (every engine, no leader)."""

    name = "statistics"

    def __init__(self, settings: Settings, pool: asyncpg.Pool):
        self.settings = settings
        self.pool = pool
        self.interval = settings.analyze_interval_seconds

    async def step(self) -> list[str]:
        """ANALYZE the partitions whose rows changed enough since their statistics were taken.
        Autovacuum does it once a minute at best, and a claim planned on a day's statistics from
        before its backlog arrived reads the whole backlog per claim (migration 0003 has the figures)."""
        async with self.pool.acquire() as conn:
            analyzed = await repo.analyze_stale_partitions(conn, self.settings.analyze_after_changes, 4)
        for name in analyzed:
            log.debug("analyzed %s", name)
        metrics.partitions_analyzed_total.inc(len(analyzed))
        return analyzed


def _reason(exc: Exception) -> str:
    return "lock not available" if isinstance(exc, asyncpg.LockNotAvailableError) else type(exc).__name__


def _bind(
    fn: Callable[[asyncpg.Connection, date], Awaitable[str]], conn: asyncpg.Connection, day: date
) -> Callable[[], Awaitable[str]]:
    return lambda: fn(conn, day)
