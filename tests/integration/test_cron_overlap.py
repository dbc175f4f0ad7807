"""A cron job's overlap policy and jitter, materialized against the real database.

`skip` drops an occurrence while a run of the schedule is live (pending, dispatched, running),
`buffer_one` while one is pending; both keep at most the first of a catch-up; both are decided in the
insert, under the job's row lock, so two engines never both make one. Jitter moves each occurrence's
run by the occurrence's own offset, the same every time it is computed. Occurrences are steered by
moving `jobs.next_fire_at` in SQL, as tests/integration/test_cron_materializer.py does."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import asyncpg
import httpx

from app.config import Settings
from app.db.connection import create_pool
from app.engine.cron import CronMaterializer
from app.services import cron
from app.telemetry import metrics
from tests.integration.test_cron_materializer import (
    EVERY_5,
    FIVE_MINUTES,
    HORIZON,
    cron_runs,
    db_now,
    grid,
    horizon_settings,
    next_fire_at,
)
from tests.support import put_job, submit_run
from tests.ui_support import ui_sign_in

CATCHUP = timedelta(hours=3)


def overlapped() -> float:
    return float(metrics.cron_occurrences_skipped_total.labels("overlap")._value.get())


async def fire_from(pool: asyncpg.Pool, job: str, at: datetime) -> None:
    await pool.execute("UPDATE jobs SET next_fire_at = $1 WHERE tenant_id = 'acme' AND name = $2", at, job)


async def an_hour_ago(pool: asyncpg.Pool) -> datetime:
    value: datetime = await pool.fetchval("SELECT date_trunc('hour', now()) - interval '1 hour'")
    return value


async def live_cron_run(pool: asyncpg.Pool, job: str, status: str) -> asyncpg.Record:
    """A run of the job's schedule, three hours old and still `status`."""
    row = await pool.fetchrow(
        """
        INSERT INTO job_runs (id, scheduled_at, tenant_id, job, origin, status, target, max_attempts,
                              backoff_seconds, timeout_seconds, due_at)
        SELECT scheduler_run_id(t), t, 'acme', $1, 'cron', $2, '{"type": "noop"}', 3, 10, 30, t
        FROM (SELECT now() - interval '3 hours' AS t) AS s
        RETURNING id, scheduled_at
        """,
        job,
        status,
    )
    assert row is not None
    return row


async def set_status(pool: asyncpg.Pool, run: asyncpg.Record, status: str) -> None:
    await pool.execute(
        "UPDATE job_runs SET status = $1 WHERE id = $2 AND scheduled_at = $3",
        status,
        run["id"],
        run["scheduled_at"],
    )


async def tick(s: Settings, pool: asyncpg.Pool) -> tuple[int, float]:
    """One materializer tick: (runs inserted, occurrences dropped for overlap)."""
    before = overlapped()
    inserted = await CronMaterializer(s, pool).step()
    return inserted, overlapped() - before


async def tick_missing(s: Settings, pool: asyncpg.Pool, since: datetime) -> tuple[int, float, set[int]]:
    """tick(), and how many occurrences in [since, the tick's clock] there may have been: the
    database's clock before and after it bounds the tick's own."""
    before = await db_now(pool)
    inserted, dropped = await tick(s, pool)
    after = await db_now(pool)
    return inserted, dropped, {len(grid(since, before)), len(grid(since, after))}


async def test_skip_drops_occurrences_while_a_run_of_the_schedule_is_live(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    s = horizon_settings(settings, cron_catchup_seconds=CATCHUP.total_seconds())
    await put_job(api, "acme", "s", tenant["auth"], schedule=EVERY_5, misfire="all", overlap="skip")
    earlier = await live_cron_run(pool, "s", "running")
    since = await an_hour_ago(pool)

    await fire_from(pool, "s", since)
    inserted, dropped, missed = await tick_missing(s, pool, since)
    assert inserted == 0 and dropped in missed  # every occurrence of the outage, counted
    assert [r["id"] for r in await cron_runs(pool, "s")] == [earlier["id"]]
    fire, last_missed = await next_fire_at(pool, "s"), since + (max(missed) - 1) * FIVE_MINUTES
    assert fire is not None and last_missed < fire <= await db_now(pool) + FIVE_MINUTES  # not ahead

    await set_status(pool, earlier, "succeeded")
    await fire_from(pool, "s", since)
    inserted, dropped, missed = await tick_missing(s, pool, since)
    assert inserted == 1 and dropped + 1 in missed  # the oldest fires; the rest overlap it
    made = [r for r in await cron_runs(pool, "s") if r["id"] != earlier["id"]]
    assert [r["scheduled_at"] for r in made] == [since]

    later = since + FIVE_MINUTES
    for status in ("pending", "dispatched", "running"):  # every live status holds the next one back
        await set_status(pool, made[0], status)
        await fire_from(pool, "s", later)
        assert (await tick(s, pool))[0] == 0, status

    # Ended, the next occurrence fires. A run submitted through the API is not the schedule's.
    await set_status(pool, made[0], "failed")
    await submit_run(api, "acme", tenant["auth"], job="s")
    await fire_from(pool, "s", later)
    assert (await tick(s, pool))[0] == 1
    cron_made = [r for r in await cron_runs(pool, "s") if r["origin"] == "cron"]
    assert [r["scheduled_at"] for r in cron_made] == [earlier["scheduled_at"], since, later]


async def test_buffer_one_keeps_one_run_waiting_behind_a_running_one(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    s = horizon_settings(settings, cron_catchup_seconds=CATCHUP.total_seconds())
    await put_job(api, "acme", "b", tenant["auth"], schedule=EVERY_5, misfire="all", overlap="buffer_one")
    await put_job(api, "acme", "neighbour", tenant["auth"], schedule=EVERY_5, misfire="all", overlap="skip")
    running = await live_cron_run(pool, "b", "running")
    since = await an_hour_ago(pool)

    await fire_from(pool, "b", since)
    inserted, dropped, missed = await tick_missing(s, pool, since)
    assert inserted == 1 and dropped + 1 in missed  # one waits behind the running one
    [waiting] = [r for r in await cron_runs(pool, "b") if r["id"] != running["id"]]
    assert (waiting["scheduled_at"], waiting["status"]) == (since, "pending")

    later = since + FIVE_MINUTES
    await fire_from(pool, "b", later)
    inserted, dropped, missed = await tick_missing(s, pool, later)
    assert inserted == 0 and dropped in missed  # one is waiting already: none more

    await set_status(pool, waiting, "running")  # it started: room for one to wait again
    await fire_from(pool, "b", later)
    assert (await tick(s, pool))[0] == 1
    statuses = [(r["scheduled_at"], r["status"]) for r in await cron_runs(pool, "b")]
    assert statuses == [(running["scheduled_at"], "running"), (since, "running"), (later, "pending")]

    # Another job's waiting runs are not this one's: its own occurrence fires beside them.
    await fire_from(pool, "neighbour", later)
    assert (await tick(s, pool))[0] == 1
    assert [r["scheduled_at"] for r in await cron_runs(pool, "neighbour")] == [later]


async def test_an_overlap_job_is_made_when_due_not_ahead(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    s = horizon_settings(settings)
    job = await put_job(api, "acme", "later", tenant["auth"], schedule=EVERY_5, overlap="buffer_one")
    fire = datetime.fromisoformat(str(job["next_fire_at"]))
    assert fire > await db_now(pool)  # within the horizon, still to come
    assert await tick(s, pool) == (0, 0)
    assert await cron_runs(pool, "later") == []
    assert await next_fire_at(pool, "later") == fire


async def test_two_engines_never_both_make_a_skip_jobs_occurrence(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    s = horizon_settings(settings, cron_catchup_seconds=CATCHUP.total_seconds())
    jobs = [f"o{i}" for i in range(8)]
    for i, name in enumerate(jobs):
        overlap = "skip" if i % 2 else "buffer_one"
        await put_job(api, "acme", name, tenant["auth"], schedule=EVERY_5, misfire="all", overlap=overlap)
    assert s.database_url
    pools = [await create_pool(s.database_url, max_size=2) for _ in range(2)]
    engines = [CronMaterializer(s, p) for p in pools]
    since = await an_hour_ago(pool)
    try:
        for round in range(10):  # a new occurrence each round; the first run made stays pending
            await pool.execute(
                "UPDATE jobs SET next_fire_at = $1 WHERE tenant_id = 'acme' AND name = ANY($2::text[])",
                since + round * FIVE_MINUTES,
                jobs,
            )
            await asyncio.gather(*(e.step() for e in engines))
    finally:
        for p in pools:
            await p.close()
    counts = await pool.fetch("SELECT job, count(*) AS n FROM job_runs WHERE origin = 'cron' GROUP BY job")
    assert {r["job"]: r["n"] for r in counts} == dict.fromkeys(jobs, 1)


async def test_jitter_moves_each_occurrence_by_its_own_stable_offset(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    s = horizon_settings(settings, cron_catchup_seconds=CATCHUP.total_seconds())
    await put_job(api, "acme", "j", tenant["auth"], schedule=EVERY_5, misfire="all", jitter_seconds=240)
    since = await an_hour_ago(pool)
    await fire_from(pool, "j", since)
    inserted, _ = await tick(s, pool)
    runs = await cron_runs(pool, "j")
    now = runs[0]["created_at"]
    occurrences = grid(since, now + HORIZON)
    assert inserted == len(runs) == len(occurrences)
    at = sorted(r["scheduled_at"] for r in runs)
    assert at == [cron.jittered("acme", "j", o, 240) for o in occurrences]
    assert all(timedelta(0) <= a - o < timedelta(seconds=240) for a, o in zip(at, occurrences, strict=True))
    assert len({a - o for a, o in zip(at, occurrences, strict=True)}) == len(at)  # spread, not one shift
    for r in runs:  # the run is due at its jittered time, and its id names that time's day
        assert r["due_at"] == r["scheduled_at"]

    await fire_from(pool, "j", since)  # the same occurrences again: each is found, none made twice
    assert (await tick(s, pool))[0] == 0
    assert len(await cron_runs(pool, "j")) == len(runs)

    # Another jitter moves the occurrences still to be made, not those made ahead already (which,
    # made again at other times, would be made twice).
    frontier = await next_fire_at(pool, "j")
    job = await put_job(api, "acme", "j", tenant["auth"], schedule=EVERY_5, misfire="all", jitter_seconds=0)
    assert datetime.fromisoformat(str(job["next_fire_at"])) == frontier
    assert (await tick(s, pool))[0] == 0
    assert len(await cron_runs(pool, "j")) == len(runs)

    await put_job(api, "acme", "k", tenant["auth"], schedule=EVERY_5, overlap="buffer_one", jitter_seconds=30)
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    listed = (await browser.get("/ui/jobs")).text  # each job's settings, on the Jobs page
    assert "overlap buffer_one · jitter up to 30 s · never paused" in listed
    assert "overlap allow · never paused" in listed
    await browser.aclose()
