"""The cron materializer over the real database: horizon, misfire policies after downtime,
idempotency across engines, the database clock, pause/resume/delete, and time zones end to end.

Jobs are created through the API; downtime is simulated by moving `jobs.next_fire_at` back in SQL,
relative to the database's now(). The materializer's own clock reading is recovered from the runs it
inserted (`created_at` is now() of its transaction, the same now() it computed occurrences from),
so every expectation is computed from the database clock, never from this process's."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import asyncpg
import httpx

from app.config import Settings
from app.db import transitions as dispatch_repo
from app.db.connection import create_pool
from app.engine import cron as cron_engine
from app.engine.cron import CronMaterializer
from app.services import cron
from tests.support import put_job

EVERY_5 = "*/5 * * * *"
FIVE_MINUTES = timedelta(minutes=5)
HORIZON = timedelta(minutes=10)  # two */5 occurrences ahead, whatever the clock reads
CATCHUP = timedelta(minutes=20)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def grid(
    lo: datetime, hi: datetime, *, step: timedelta = FIVE_MINUTES, closed: bool = True
) -> list[datetime]:
    """Multiples of `step` (a UTC cron grid such as */5) in [lo, hi], or (lo, hi] if not `closed`.

    The test's own oracle, by integer arithmetic, independent of app.services.cron."""
    n = -((lo - _EPOCH) // -step)  # ceil
    out = []
    while (at := _EPOCH + n * step) <= hi:
        if closed or at > lo:
            out.append(at)
        n += 1
    return out


def first_after(at: datetime, step: timedelta = FIVE_MINUTES) -> datetime:
    return _EPOCH + ((at - _EPOCH) // step + 1) * step


async def db_now(pool: asyncpg.Pool) -> datetime:
    value: datetime = await pool.fetchval("SELECT now()")
    return value


async def cron_runs(pool: asyncpg.Pool, job: str) -> list[asyncpg.Record]:
    return await pool.fetch(
        "SELECT * FROM job_runs WHERE tenant_id = 'acme' AND job = $1 ORDER BY scheduled_at", job
    )


async def next_fire_at(pool: asyncpg.Pool, job: str) -> datetime | None:
    value: datetime | None = await pool.fetchval(
        "SELECT next_fire_at FROM jobs WHERE tenant_id = 'acme' AND name = $1", job
    )
    return value


async def go_down(pool: asyncpg.Pool, *jobs: str) -> datetime:
    """Simulate an outage: the jobs' next fire is an on-grid instant an hour or two ago."""
    value: datetime = await pool.fetchval(
        "UPDATE jobs SET next_fire_at = date_trunc('hour', now()) - interval '1 hour'"
        " WHERE tenant_id = 'acme' AND name = ANY($1::text[]) RETURNING next_fire_at",
        list(jobs),
    )
    return value


async def materialize(
    settings: Settings, pool: asyncpg.Pool, job: str
) -> tuple[int, list[asyncpg.Record], datetime]:
    """One materializer tick; returns (inserted, the job's runs, the tick's database clock)."""
    before = await db_now(pool)
    inserted = await CronMaterializer(settings, pool).step()
    after = await db_now(pool)
    runs = await cron_runs(pool, job)
    assert runs, "nothing was materialized"
    clock = {r["created_at"] for r in runs}
    assert len(clock) == 1, clock  # one transaction, one now()
    now = clock.pop()
    assert before <= now <= after
    return inserted, runs, now


async def claim_all(pool: asyncpg.Pool) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        floor, now = await dispatch_repo.claim_floor(conn)
        return await dispatch_repo.claim_due_runs(
            conn,
            floor=floor,
            ceiling=now + timedelta(seconds=5),
            per_tenant_cap=1000,
            batch_size=1000,
            owner="test",
            lease_seconds=30,
        )


def horizon_settings(settings: Settings, **overrides: object) -> Settings:
    values = {
        "cron_horizon_seconds": HORIZON.total_seconds(),
        "cron_catchup_seconds": CATCHUP.total_seconds(),
        **overrides,
    }
    return settings.model_copy(update=values)


async def test_materializes_the_horizon_on_the_schedule_and_moves_next_fire_past_it(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    before = await db_now(pool)
    job = await put_job(api, "acme", "every5", tenant["auth"], schedule=EVERY_5, payload={"k": 1}, priority=1)
    after = await db_now(pool)
    put_fire = datetime.fromisoformat(str(job["next_fire_at"]))
    assert put_fire in {first_after(before), first_after(after)}  # the database's clock at PUT

    inserted, runs, now = await materialize(horizon_settings(settings), pool, "every5")

    assert [r["scheduled_at"] for r in runs] == grid(now, now + HORIZON, closed=False)
    assert inserted == len(runs) == 2
    for r in runs:
        assert r["origin"] == "cron" and r["status"] == "pending" and r["attempt"] == 0
        assert r["due_at"] == r["scheduled_at"]
        assert r["payload"] == {"k": 1} and r["target"] == {"type": "noop"} and r["priority"] == 1
    assert await next_fire_at(pool, "every5") == first_after(now + HORIZON)
    # Not due yet: nothing to claim. (Due ones are claimed in the misfire tests below.)
    assert await claim_all(pool) == []


async def test_misfire_latest_fires_once_for_the_whole_outage(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    await put_job(api, "acme", "latest", tenant["auth"], schedule=EVERY_5, misfire="latest")
    down_since = await go_down(pool, "latest")
    _, runs, now = await materialize(horizon_settings(settings), pool, "latest")

    missed = grid(down_since, now)
    assert len(missed) >= 12  # an hour or more of */5 went by unmaterialized
    upcoming = grid(now, now + HORIZON, closed=False)
    assert [r["scheduled_at"] for r in runs] == [missed[-1], *upcoming]  # the most recent, once
    assert await next_fire_at(pool, "latest") == first_after(now + HORIZON)

    # The missed occurrence is due and claimable now; the upcoming ones wait for their time.
    claimed = await claim_all(pool)
    assert [(r["job"], r["scheduled_at"]) for r in claimed] == [("latest", missed[-1])]


async def test_misfire_all_fires_every_missed_occurrence_within_catchup(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    await put_job(api, "acme", "all", tenant["auth"], schedule=EVERY_5, misfire="all")
    down_since = await go_down(pool, "all")
    _, runs, now = await materialize(horizon_settings(settings), pool, "all")

    missed = grid(down_since, now)
    within = [at for at in missed if at >= now - CATCHUP]
    assert len(within) in (4, 5) and len(missed) > len(within)  # the catch-up bound cuts the outage
    upcoming = grid(now, now + HORIZON, closed=False)
    assert [r["scheduled_at"] for r in runs] == within + upcoming
    assert await next_fire_at(pool, "all") == first_after(now + HORIZON)
    claimed = await claim_all(pool)
    assert sorted(r["scheduled_at"] for r in claimed) == within


async def test_misfire_skip_drops_the_missed_occurrences_but_not_the_upcoming(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    await put_job(api, "acme", "skip", tenant["auth"], schedule=EVERY_5, misfire="skip")
    down_since = await go_down(pool, "skip")
    _, runs, now = await materialize(horizon_settings(settings), pool, "skip")

    upcoming = grid(now, now + HORIZON, closed=False)
    # Only an occurrence found on time (no older than the tolerance) still fires; none of the outage's.
    on_time = [at for at in grid(down_since, now) if at >= now - cron.ON_TIME_TOLERANCE]
    assert [r["scheduled_at"] for r in runs] == on_time + upcoming
    assert all(r["scheduled_at"] >= now - cron.ON_TIME_TOLERANCE for r in runs)
    assert await next_fire_at(pool, "skip") == first_after(now + HORIZON)


async def test_materializing_twice_inserts_nothing_twice(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    s = horizon_settings(settings, cron_catchup_seconds=3 * 3600)
    await put_job(api, "acme", "twice", tenant["auth"], schedule=EVERY_5, misfire="all")
    down_since = await go_down(pool, "twice")
    _, runs, now = await materialize(s, pool, "twice")
    assert [r["scheduled_at"] for r in runs] == grid(down_since, now + HORIZON)

    assert await CronMaterializer(s, pool).step() == 0  # next fire is past the horizon
    await go_down(pool, "twice")  # as if the job's next fire were reset: the same occurrences again
    again = await CronMaterializer(s, pool).step()
    after = await cron_runs(pool, "twice")
    assert again == len(after) - len(runs)  # only an occurrence that came due in between, if any
    assert len({r["scheduled_at"] for r in after}) == len(after)
    assert {r["id"] for r in runs} <= {r["id"] for r in after}


async def test_two_engines_materializing_concurrently_never_duplicate(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    s = horizon_settings(settings, cron_catchup_seconds=3 * 3600)
    jobs = [f"c{i}" for i in range(8)]
    for name in jobs:
        await put_job(api, "acme", name, tenant["auth"], schedule=EVERY_5, misfire="all")
    assert s.database_url
    pools = [await create_pool(s.database_url, max_size=2) for _ in range(2)]
    engines = [CronMaterializer(s, p) for p in pools]
    inserted = 0
    outages = set()
    try:
        before = await db_now(pool)
        for _ in range(15):
            outages.add(await go_down(pool, *jobs))
            inserted += sum(await asyncio.gather(*(e.step() for e in engines)))
        after = await db_now(pool)
    finally:
        for p in pools:
            await p.close()

    counts = await pool.fetch(
        "SELECT job, count(*) AS n, count(DISTINCT (tenant_id, job, scheduled_at)) AS d,"
        " min(scheduled_at) AS lo, max(scheduled_at) AS hi"
        " FROM job_runs WHERE origin = 'cron' GROUP BY job ORDER BY job"
    )
    assert [r["job"] for r in counts] == jobs
    down_since = min(outages)  # the same instant every round, unless an hour began meanwhile
    for r in counts:
        assert r["n"] == r["d"]  # no (tenant, job, scheduled_at) twice
        # Every occurrence from the outage's start to the last tick's horizon, without a gap.
        assert r["lo"] == down_since and r["n"] == len(grid(r["lo"], r["hi"]))
        assert grid(down_since, before + HORIZON)[-1] <= r["hi"] <= grid(down_since, after + HORIZON)[-1]
    assert inserted == sum(r["n"] for r in counts)  # each run was reported by the engine that made it


async def test_a_horizon_longer_than_one_tick_can_insert_is_completed_by_later_ticks(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    horizon = timedelta(hours=20)  # 1200 minutes: more than one tick inserts for one job
    assert horizon / timedelta(minutes=1) > cron_engine.OCCURRENCES_PER_JOB
    s = settings.model_copy(update={"cron_horizon_seconds": horizon.total_seconds()})
    await put_job(api, "acme", "minutely", tenant["auth"], schedule="* * * * *")
    engine = CronMaterializer(s, pool)
    before = await db_now(pool)
    ticks = [await engine.step() for _ in range(3)]
    after = await db_now(pool)

    assert ticks[0] == cron_engine.OCCURRENCES_PER_JOB and ticks[1] > 0
    at = [r["scheduled_at"] for r in await cron_runs(pool, "minutely")]
    minute = timedelta(minutes=1)
    assert at == grid(at[0], at[-1], step=minute)  # no gap where the first tick stopped
    assert first_after(before, minute) <= at[0] <= first_after(after, minute)
    assert at[-1] >= grid(before, before + horizon, step=minute)[-1]
    assert await next_fire_at(pool, "minutely") == at[-1] + minute


async def test_paused_jobs_are_not_materialized_resume_recomputes_delete_cancels(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    s = horizon_settings(settings)
    job = await put_job(api, "acme", "p", tenant["auth"], schedule=EVERY_5, paused=True)
    assert job["next_fire_at"] is None
    await go_down(pool, "p")  # even with a stale next fire in the past, paused means paused
    assert await CronMaterializer(s, pool).step() == 0
    assert await cron_runs(pool, "p") == []

    before = await db_now(pool)
    job = await put_job(api, "acme", "p", tenant["auth"], schedule=EVERY_5, paused=False)
    after = await db_now(pool)
    resumed = datetime.fromisoformat(str(job["next_fire_at"]))
    assert resumed in {first_after(before), first_after(after)}  # recomputed, not the stale value
    assert await next_fire_at(pool, "p") == resumed
    _, runs, now = await materialize(s, pool, "p")
    assert [r["scheduled_at"] for r in runs] == grid(now, now + HORIZON, closed=False)  # no catch-up

    r = await api.delete("/tenants/acme/jobs/p", headers=tenant["auth"])
    assert r.status_code == 204, r.text
    runs = await cron_runs(pool, "p")
    assert runs and all(r["status"] == "cancelled" and r["finished_at"] is not None for r in runs)
    assert await CronMaterializer(s, pool).step() == 0
    assert len(await cron_runs(pool, "p")) == len(runs)


def last_spring_forward(zone: ZoneInfo, before: datetime) -> date:
    """The most recent day before `before` on which `zone`'s clocks went forward."""
    day = before.astimezone(zone).date()
    for _ in range(800):
        prev = day - timedelta(days=1)
        noon, noon_before = (datetime.combine(d, time(12), zone).utcoffset() for d in (day, prev))
        assert noon is not None and noon_before is not None
        if noon > noon_before:
            return day
        day = prev
    raise AssertionError(f"no spring-forward in {zone} in the last two years")


async def test_time_zone_plumbing_from_put_to_materialized_runs(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    """DST semantics are unit-tested (tests/unit/test_cron.py); this proves the zone reaches them."""
    schedule, tz = "30 2 * * *", "Europe/Berlin"
    berlin = ZoneInfo(tz)
    before = await db_now(pool)
    job = await put_job(api, "acme", "berlin", tenant["auth"], schedule=schedule, timezone=tz, misfire="all")
    after = await db_now(pool)
    fire = datetime.fromisoformat(str(job["next_fire_at"]))
    assert fire in {cron.next_fire(schedule, tz, before), cron.next_fire(schedule, tz, after)}

    # An outage that began the day before the last spring-forward: catch everything up since then.
    gap_day = last_spring_forward(berlin, before)
    down_since = datetime.combine(gap_day - timedelta(days=1), time(2, 30), berlin).astimezone(UTC)
    await pool.execute("UPDATE jobs SET next_fire_at = $1 WHERE name = 'berlin'", down_since)
    catchup = (after - down_since + timedelta(days=1)).total_seconds()
    s = settings.model_copy(update={"cron_catchup_seconds": catchup})
    _, runs, now = await materialize(s, pool, "berlin")

    at = [r["scheduled_at"] for r in runs]
    horizon = timedelta(seconds=s.cron_horizon_seconds)
    assert at == cron.occurrences_between(
        schedule, tz, down_since - timedelta(seconds=1), now + horizon, 1000
    )
    assert at[0] == down_since
    local = [a.astimezone(berlin) for a in at]
    on_gap_day = [t for t in local if t.date() == gap_day]
    assert [t.time() for t in on_gap_day] == [time(3, 0)]  # 02:30 does not exist: fires once, at 03:00
    assert all(t.time() == time(2, 30) for t in local if t.date() != gap_day)
    assert len({t.date() for t in local}) == len(local)  # once a day, fall-back day included
