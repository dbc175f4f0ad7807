"""Partition maintenance over the real database (DESIGN §2): premaking, rows stranded in DEFAULT,
retention that loses nothing, DDL that neither waits for nor stalls claims, one leader at a time,
and a claim that reaches back into older days' partitions."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time as clock
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

import asyncpg
import httpx
import pytest
from prometheus_client import CollectorRegistry

from app.config import Settings
from app.db import transitions as dispatch_repo
from app.db.connection import connect, create_pool
from app.engine import partitions
from app.engine.partitions import PartitionMaintenance, PartitionStatistics
from app.telemetry.metrics import expose_engine_metrics
from tests import factories
from tests.support import submit_run

EMPTY_REPORT: dict[str, list[str]] = {"created": [], "kept": [], "dropped": [], "tags": [], "audit": []}


def part(day: date) -> str:
    return f"job_runs_p{day:%Y%m%d}"


async def today(conn: asyncpg.Connection | asyncpg.Pool) -> date:
    value: date = await conn.fetchval("SELECT (now() AT TIME ZONE 'UTC')::date")
    return value


async def attached(conn: asyncpg.Connection | asyncpg.Pool) -> set[str]:
    """Partitions of job_runs according to pg_inherits, DEFAULT included."""
    rows = await conn.fetch(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'job_runs'::regclass"
    )
    return {r["relname"] for r in rows}


async def table_exists(conn: asyncpg.Connection | asyncpg.Pool, name: str) -> bool:
    return await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", name)  # type: ignore[no-any-return]


async def homes(pool: asyncpg.Pool, ids: Sequence[object]) -> set[str]:
    """The partitions these runs live in."""
    rows = await pool.fetch(
        "SELECT tableoid::regclass::text AS home FROM job_runs WHERE id = ANY($1::uuid[])", ids
    )
    return {r["home"] for r in rows}


def at_noon(day: date) -> datetime:
    return datetime.combine(day, time(12), UTC)


def maintenance(settings: Settings, pool: asyncpg.Pool, **overrides: object) -> PartitionMaintenance:
    return PartitionMaintenance(settings.model_copy(update=overrides), pool)


async def claim_bounds(conn: asyncpg.Connection) -> tuple[datetime, datetime]:
    """(floor, ceiling) as the engine's ClaimBounds reads them: on the database's clock, in a statement
    of their own (the floor query reads every partition; the claim itself prunes to floor..ceiling)."""
    floor, now = await dispatch_repo.claim_floor(conn)
    return floor, now + timedelta(seconds=2)


async def claim(
    conn: asyncpg.Connection,
    owner: str = "test",
    *,
    floor: datetime | None = None,
    bounds: tuple[datetime, datetime] | None = None,
) -> list[asyncpg.Record]:
    low, ceiling = bounds or await claim_bounds(conn)
    return await dispatch_repo.claim_due_runs(
        conn,
        floor=floor or low,
        ceiling=ceiling,
        per_tenant_cap=1000,
        batch_size=1000,
        owner=owner,
        lease_seconds=30,
    )


async def test_premakes_yesterday_through_premake_days_ahead(settings: Settings, pool: asyncpg.Pool) -> None:
    report = await maintenance(settings, pool, premake_days=12).step()
    day = await today(pool)
    wanted = {part(day + timedelta(days=n)) for n in range(-1, 13)}
    have = await attached(pool)
    assert wanted <= have and "job_runs_default" in have
    # The template premade 7 days ahead; this pass added the rest, and says so.
    assert {r.split(":")[0] for r in report["created"]} >= {
        str(day + timedelta(days=n)) for n in range(8, 13)
    }
    assert await maintenance(settings, pool, premake_days=12).step() == EMPTY_REPORT  # idempotent


async def test_rows_stranded_in_default_move_into_their_new_partition(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    day = await today(pool) + timedelta(days=20)  # past premake: no partition yet
    assert not await table_exists(pool, part(day))
    via_api = await submit_run(
        api, "acme", tenant["auth"], job="hello", scheduled_at=at_noon(day).isoformat(), payload={"n": "api"}
    )
    async with pool.acquire() as conn:
        direct = await factories.runs(conn, 50, start=at_noon(day), step=timedelta(minutes=1))
        # Another day, also stranded.
        other = await factories.runs(conn, 3, start=at_noon(day + timedelta(days=1)))
    before = await pool.fetch("SELECT * FROM job_runs ORDER BY id")
    assert await pool.fetchval("SELECT count(*) FROM job_runs_default") == 54

    # Beyond the premade window the rows wait in DEFAULT: no partition per far-future day.
    report = await maintenance(settings, pool).step()
    assert not any(r.startswith((str(day), str(day + timedelta(days=1)))) for r in report["created"])
    assert await pool.fetchval("SELECT count(*) FROM job_runs_default") == 54
    # Once their days are premade, they move.
    report = await maintenance(settings, pool, premake_days=21).step()

    assert f"{day}: created, moved 51" in report["created"]
    assert f"{day + timedelta(days=1)}: created, moved 3" in report["created"]
    assert await pool.fetchval("SELECT count(*) FROM job_runs_default") == 0
    assert {part(day), part(day + timedelta(days=1)), "job_runs_default"} <= await attached(pool)
    assert await pool.fetch("SELECT * FROM job_runs ORDER BY id") == before  # same ids, same rows
    assert await homes(pool, [via_api["id"], *(r["id"] for r in direct)]) == {part(day)}
    assert await homes(pool, [r["id"] for r in other]) == {part(day + timedelta(days=1))}
    r = await api.get(f"/runs/{via_api['id']}", headers=tenant["auth"])
    assert r.status_code == 200, r.text
    assert r.json()["id"] == via_api["id"] and r.json()["payload"] == {"n": "api"}


async def test_retention_drops_finished_days_and_keeps_a_day_with_unfinished_runs(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    day = await today(pool)
    finished, unfinished = day - timedelta(days=40), day - timedelta(days=39)
    async with pool.acquire() as conn:
        for d in (finished, unfinished):
            await conn.execute(
                "SELECT scheduler_create_day_partition((now() AT TIME ZONE 'UTC')::date - $1::int)",
                (day - d).days,
            )
        for status in ("succeeded", "failed", "cancelled", "expired"):
            await factories.runs(conn, 3, start=at_noon(finished), status=status)
        await factories.runs(conn, 2, start=at_noon(unfinished), status="succeeded")
        pending = await factories.runs(conn, 1, start=at_noon(unfinished) + timedelta(hours=1))
        # Edges (migration 0023) whose child is in the day dropped, and one whose child is kept.
        runs = await conn.fetch("SELECT id, scheduled_at FROM job_runs ORDER BY scheduled_at")
        kept_child = max(runs, key=lambda r: r["scheduled_at"])
        for child in (runs[0], runs[1], kept_child):
            await conn.execute(
                "INSERT INTO run_dependencies VALUES ($1, $2, $3, $4, 't', 'x', 'cancel', true)",
                child["id"],
                child["scheduled_at"],
                runs[2]["id"],
                runs[2]["scheduled_at"],
            )
    assert {part(finished), part(unfinished)} <= await attached(pool)

    report = await maintenance(settings, pool, retention_days=3).step()

    assert report["dropped"] == [str(finished)] and report["kept"] == [str(unfinished)]
    assert await pool.fetchval("SELECT array_agg(child_id) FROM run_dependencies") == [kept_child["id"]]
    have = await attached(pool)
    assert part(finished) not in have and not await table_exists(pool, part(finished))  # detached and gone
    assert part(unfinished) in have
    exported = CollectorRegistry()  # what an engine exports (an engine-only gauge)
    expose_engine_metrics(exported)
    assert exported.get_sample_value("scheduler_partitions_at_risk") == 1
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM job_runs WHERE scheduled_at < $1", at_noon(day)) == 3
        claimed = await claim(conn)  # the floor reaches back 39 days
    assert [r["id"] for r in claimed] == [pending[0]["id"]]


async def test_retention_keeps_a_day_that_gains_an_unfinished_run_while_it_is_retired(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    """A run inserted into an old day between maintenance's look and its DETACH is not dropped."""
    old = await today(pool) - timedelta(days=40)
    async with pool.acquire() as conn:
        await conn.execute("SELECT scheduler_create_day_partition($1)", old)
        await factories.runs(conn, 2, start=at_noon(old), status="succeeded")
    assert settings.database_url
    writer = await connect(settings.database_url)
    try:
        tx = writer.transaction()
        await tx.start()
        late = await factories.runs(writer, 1, start=at_noon(old) + timedelta(hours=2))  # not committed yet
        task = asyncio.create_task(maintenance(settings, pool, retention_days=3).step())
        await asyncio.sleep(0.3)  # maintenance looked (nothing live yet) and waits for the writer's locks
        await tx.commit()
        report = await task
    finally:
        await writer.close()
    assert report["kept"] == [str(old)] and report["dropped"] == []
    assert await pool.fetchval("SELECT status FROM job_runs WHERE id = $1", late[0]["id"]) == "pending"


async def test_a_row_that_lands_in_default_while_its_day_is_created_is_moved_on_retry(
    settings: Settings, pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    day = await today(pool) + timedelta(days=8)
    assert settings.database_url
    holder, writer = await connect(settings.database_url), await connect(settings.database_url)
    try:
        with caplog.at_level(logging.INFO, logger=partitions.__name__):
            async with holder.transaction():
                # Hold the creation at its ATTACH, after it found DEFAULT empty for the day.
                await holder.execute("LOCK TABLE ONLY job_runs IN SHARE UPDATE EXCLUSIVE MODE")
                task = asyncio.create_task(maintenance(settings, pool, premake_days=8).step())
                await asyncio.sleep(0.3)
                landed = await factories.runs(writer, 1, start=at_noon(day))  # into DEFAULT, committed
            report = await task
    finally:
        await holder.close()
        await writer.close()
    assert report["created"] == [f"{day}: created, moved 1"]
    assert "CheckViolationError (try 1); retrying" in caplog.text  # ATTACH refused, the retry moved it
    assert await homes(pool, [landed[0]["id"]]) == {part(day)}


@dataclass
class ClaimTraffic:
    """Claims as engines make them, on a steady stream of newly due runs, timed one by one."""

    pool: asyncpg.Pool
    claimed: int = 0
    durations: list[tuple[float, float]] = field(default_factory=list)  # (finished at, seconds)
    long_claims: int = 0
    errors: list[BaseException] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def short_claims(self) -> None:
        async with self.pool.acquire() as conn:
            while not self.stop.is_set():
                try:
                    await factories.runs(conn, 5)
                    started = clock.monotonic()
                    bounds = await claim_bounds(conn)
                    async with conn.transaction():
                        self.claimed += len(await claim(conn, "short", bounds=bounds))
                    self.durations.append((clock.monotonic(), clock.monotonic() - started))
                except Exception as exc:  # recorded, and asserted empty by the test
                    self.errors.append(exc)
                await asyncio.sleep(0.01)

    async def long_claim(self, hold: float = 1.0) -> None:
        async with self.pool.acquire() as conn:
            while not self.stop.is_set():
                try:
                    bounds = await claim_bounds(conn)
                    async with conn.transaction():
                        await claim(conn, "long", bounds=bounds)
                        await asyncio.sleep(hold)  # a claim transaction that stays open
                    self.long_claims += 1
                except Exception as exc:
                    self.errors.append(exc)

    def claims_between(self, start: float, end: float) -> int:
        return sum(1 for at, _ in self.durations if start <= at <= end)

    def slowest(self) -> float:
        return max(d for _, d in self.durations)


@contextlib.asynccontextmanager
async def claim_traffic(settings: Settings, long: bool = False) -> AsyncIterator[ClaimTraffic]:
    assert settings.database_url
    pool = await create_pool(settings.database_url, max_size=3)
    traffic = ClaimTraffic(pool)
    tasks = [asyncio.create_task(traffic.short_claims())]
    if long:
        tasks.append(asyncio.create_task(traffic.long_claim()))
    try:
        await asyncio.sleep(0.5)
        yield traffic
        await asyncio.sleep(0.3)
    finally:
        traffic.stop.set()
        await asyncio.gather(*tasks)
        await pool.close()


async def test_creating_partitions_does_not_wait_for_an_open_claim_transaction(
    settings: Settings, pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    async with pool.acquire() as conn:
        await factories.runs(conn, 10)
    assert settings.database_url
    engine = await connect(settings.database_url)
    try:
        bounds = await claim_bounds(engine)
        async with engine.transaction():
            assert len(await claim(engine, bounds=bounds)) == 10  # claimed, locks held, not committed
            with caplog.at_level(logging.INFO, logger=partitions.__name__):
                report = await maintenance(settings, pool, premake_days=10).step()
            assert len(report["created"]) >= 3  # while the claim is still open
    finally:
        await engine.close()
    assert "lock not available" not in caplog.text
    day = await today(pool)
    assert {part(day + timedelta(days=n)) for n in range(8, 11)} <= await attached(pool)


async def test_maintenance_completes_while_claims_run_continuously(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    day = await today(pool)
    old = day - timedelta(days=40)
    async with pool.acquire() as conn:
        await conn.execute("SELECT scheduler_create_day_partition($1)", old)
        await factories.runs(conn, 5, start=at_noon(old), status="succeeded")

    async with claim_traffic(settings, long=True) as traffic:
        started = clock.monotonic()
        report = await maintenance(settings, pool, premake_days=12, retention_days=3).step()
        finished = clock.monotonic()
        creations_only = await maintenance(settings, pool, premake_days=14).step()
        after_creations = clock.monotonic()

    assert {r.split(":")[0] for r in report["created"]} >= {
        str(day + timedelta(days=n)) for n in range(8, 13)
    }
    assert report["dropped"] == [str(old)]
    assert {r.split(":")[0] for r in creations_only["created"]} == {
        str(day + timedelta(days=n)) for n in (13, 14)
    }
    have = await attached(pool)
    assert {part(day + timedelta(days=n)) for n in range(-1, 15)} <= have and part(old) not in have
    assert traffic.errors == []
    assert traffic.claimed > 0 and traffic.long_claims > 0
    assert traffic.claims_between(finished, after_creations + 0.3) > 0  # and claims went on after it
    # Retiring needs the parent exclusively, so it waits for the long claim and claims queue behind
    # it meanwhile, but never longer than the DDL's lock_timeout.
    assert traffic.slowest() < partitions.LOCK_TIMEOUT_SECONDS + 0.5
    assert finished - started < 2 * partitions.LOCK_TIMEOUT_SECONDS


@contextlib.asynccontextmanager
async def default_locked(settings: Settings) -> AsyncIterator[asyncpg.Connection]:
    """Another session holding ACCESS SHARE on DEFAULT, as a long query through the parent would."""
    assert settings.database_url
    conn = await connect(settings.database_url)
    try:
        async with conn.transaction():
            await conn.execute("LOCK TABLE job_runs_default IN ACCESS SHARE MODE")
            yield conn
    finally:
        await conn.close()


async def test_ddl_blocked_on_default_retries_and_succeeds_when_the_lock_goes(
    settings: Settings, pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    day = await today(pool)
    hold = partitions.LOCK_TIMEOUT_SECONDS + 1.0  # longer than one try waits
    with caplog.at_level(logging.INFO, logger=partitions.__name__):
        async with claim_traffic(settings) as traffic:
            async with default_locked(settings):
                task = asyncio.create_task(maintenance(settings, pool, premake_days=8).step())
                await asyncio.sleep(hold)
            report = await task

    assert [r.split(":")[0] for r in report["created"]] == [str(day + timedelta(days=8))]
    assert "lock not available" in caplog.text  # it did time out and retry
    assert part(day + timedelta(days=8)) in await attached(pool)
    assert traffic.errors == [] and traffic.claimed > 0
    # A DDL waiting for DEFAULT does not hold claims up beyond its lock_timeout.
    assert traffic.slowest() < partitions.LOCK_TIMEOUT_SECONDS + 0.5


async def test_ddl_that_cannot_get_its_lock_gives_up_cleanly_and_the_next_pass_succeeds(
    settings: Settings, pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    day = await today(pool)
    s = settings.model_copy(update={"premake_days": 8})
    impatient = PartitionMaintenance(s, pool, lock_timeout_seconds=0.1, ddl_tries=2)
    async with default_locked(settings):
        with caplog.at_level(logging.INFO, logger=partitions.__name__):
            assert (await impatient.step())["created"] == []
    assert "gave up after 2 tries" in caplog.text
    assert part(day + timedelta(days=8)) not in await attached(pool)
    report = await impatient.step()
    assert [r.split(":")[0] for r in report["created"]] == [str(day + timedelta(days=8))]


async def test_only_one_leader_runs_a_pass(settings: Settings, pool: asyncpg.Pool) -> None:
    day = await today(pool)
    s = settings.model_copy(update={"premake_days": 8})
    async with default_locked(settings):
        first, second = PartitionMaintenance(s, pool), PartitionMaintenance(s, pool)
        passes = asyncio.gather(first.step(), second.step())
        await asyncio.sleep(0.5)  # the leader waits for DEFAULT; the other has long given up
    reports = await passes
    assert None in reports  # the other one did not get the lock: it skipped its step
    assert [r for r in reports if r is not None] == [
        {
            "created": [f"{day + timedelta(days=8)}: created"],
            "kept": [],
            "dropped": [],
            "tags": [f"{day + timedelta(days=8)}: created"],
            "audit": [f"{day + timedelta(days=8)}: created"],
        },
    ]


async def test_claim_reaches_runs_in_yesterdays_partition(pool: asyncpg.Pool) -> None:
    day = await today(pool)
    midnight = datetime.combine(day, time(0), UTC)
    async with pool.acquire() as conn:
        yesterday = await factories.runs(conn, 3, start=midnight - timedelta(hours=6))
        today_ = await factories.runs(conn, 3, start=midnight)  # never later than now
        assert await homes(pool, [r["id"] for r in yesterday]) == {part(day - timedelta(days=1))}
        assert await homes(pool, [r["id"] for r in today_]) == {part(day)}
        only_today = await claim(conn, floor=midnight)  # a floor of today cannot see yesterday
        assert {r["id"] for r in only_today} == {r["id"] for r in today_}
        floor, _ = await dispatch_repo.claim_floor(conn)
        assert floor == yesterday[0]["scheduled_at"]  # the oldest unfinished run
        rest = await claim(conn)
    assert {r["id"] for r in rest} == {r["id"] for r in yesterday}


async def test_a_busy_partition_is_analyzed_once_enough_of_it_changed(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    """Its statistics then describe the pending backlog the claims plan against (migration 0003)."""
    keeper = PartitionStatistics(settings.model_copy(update={"analyze_after_changes": 300}), pool)
    async with pool.acquire() as conn:
        day = await today(conn)
        await PartitionMaintenance(settings, pool).step()  # today's partition exists
        await factories.runs(conn, 100)
        assert await keeper.step() == []  # 100 changes: not yet
        await factories.runs(conn, 400, start=await conn.fetchval("SELECT now()") - timedelta(seconds=30))
        # Table counters reach the statistics system within a second or so of the commit.
        deadline = clock.monotonic() + 10
        analyzed: list[str] = []
        while not analyzed and clock.monotonic() < deadline:
            await asyncio.sleep(0.2)
            analyzed = await keeper.step()
        assert analyzed == [part(day)]
        estimate = await conn.fetchval("SELECT reltuples FROM pg_class WHERE oid = $1::regclass", part(day))
        assert estimate == 500  # the partition's statistics now count the backlog
        assert await keeper.step() == []  # nothing changed since
