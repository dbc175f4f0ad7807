"""POST /tenants/{t}/jobs/{name}/backfill: a cron job's occurrences in [from, to) made into runs, each
at most once however often (and however concurrently) it is asked, at most 1000 per request, within
the tenant's backlog quota, held when the job is paused; bad input is a 422 naming the field, with
nothing written."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from app.config import Settings
from app.engine.cron import CronMaterializer
from app.services import cron
from tests.integration.test_cron_materializer import EVERY_5, FIVE_MINUTES, cron_runs, db_now, grid
from tests.support import api_client, assert_error, put_job, snapshot


def iso(at: datetime) -> str:
    return at.isoformat()


def times(runs: list[dict[str, Any]]) -> list[datetime]:
    return [datetime.fromisoformat(r["scheduled_at"]) for r in runs]


async def backfill(
    api: httpx.AsyncClient, auth: dict, job: str, start: datetime, end: datetime
) -> dict[str, Any]:
    r = await api.post(
        f"/tenants/acme/jobs/{job}/backfill", json={"from": iso(start), "to": iso(end)}, headers=auth
    )
    assert r.status_code == 200, r.text
    return dict(r.json())


async def two_hours_ago(pool: asyncpg.Pool) -> datetime:
    value: datetime = await pool.fetchval("SELECT date_trunc('hour', now()) - interval '2 hours'")
    return value


async def test_each_occurrence_is_made_once_however_often_it_is_asked(
    pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "report", auth, schedule=EVERY_5, payload={"k": 1}, priority=2)
    start = await two_hours_ago(pool)
    hour = start + timedelta(hours=1)

    first = await backfill(api, auth, "report", start, hour)
    assert times(first["runs"]) == grid(start, hour)[:-1]
    assert first["existing"] == 0 and len(first["runs"]) == 12  # [from, to): `to` itself is not included
    for r in first["runs"]:
        assert (r["job"], r["status"], r["payload"], r["priority"]) == ("report", "pending", {"k": 1}, 2)
        assert r["held"] is None
    again = await backfill(api, auth, "report", start, hour)
    assert (again["runs"], again["existing"]) == ([], 12)
    overlapping = await backfill(
        api, auth, "report", start + timedelta(minutes=30), hour + timedelta(minutes=30)
    )
    assert (len(overlapping["runs"]), overlapping["existing"]) == (6, 6)

    # Four requests for one range at once: each occurrence is made by exactly one of them.
    later = hour + timedelta(minutes=30)
    answers = await asyncio.gather(
        *(backfill(api, auth, "report", later, later + timedelta(minutes=25)) for _ in range(4))
    )
    assert sum(len(a["runs"]) for a in answers) == 5
    assert sorted(a["existing"] for a in answers) == sorted(5 - len(a["runs"]) for a in answers)
    at = [r["scheduled_at"] for r in await cron_runs(pool, "report")]
    assert at == grid(start, later + timedelta(minutes=20)) and len(set(at)) == len(at)
    origins = await pool.fetch("SELECT DISTINCT origin FROM job_runs WHERE job = 'report'")
    assert [o["origin"] for o in origins] == ["cron"]


async def test_a_backfill_finds_the_runs_the_schedule_made_jitter_included(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "spread", auth, schedule=EVERY_5, jitter_seconds=600)
    s = settings.model_copy(update={"cron_horizon_seconds": 1800})
    await CronMaterializer(s, pool).step()
    made = await cron_runs(pool, "spread")
    now = made[0]["created_at"]
    occurrences = grid(now, now + timedelta(minutes=30), closed=False)
    # Each at its own offset, up to two periods: the runs' order is not the occurrences'.
    assert sorted(r["scheduled_at"] for r in made) == sorted(
        cron.jittered("acme", "spread", o, 600) for o in occurrences
    )

    answer = await backfill(api, auth, "spread", now - timedelta(minutes=20), occurrences[-1] + FIVE_MINUTES)
    past = grid(now - timedelta(minutes=20), now)
    assert answer["existing"] == len(occurrences)  # the schedule's own runs, found at their jittered times
    assert times(answer["runs"]) == sorted(cron.jittered("acme", "spread", o, 600) for o in past)


async def test_at_most_1000_occurrences_per_request(
    pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "minutely", auth, schedule="* * * * *")
    start = await two_hours_ago(pool) - timedelta(days=1)
    before = await snapshot(pool)
    r = await api.post(
        "/tenants/acme/jobs/minutely/backfill",
        json={"from": iso(start), "to": iso(start + timedelta(minutes=1001))},
        headers=auth,
    )
    assert_error(r, 422, "invalid_input", field="to")
    assert await snapshot(pool) == before
    answer = await backfill(api, auth, "minutely", start, start + timedelta(minutes=1000))
    assert len(answer["runs"]) == 1000


async def test_the_runs_made_count_against_the_tenants_quota(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "report", auth, schedule=EVERY_5)
    start = await two_hours_ago(pool)
    async with api_client(settings, tenant_max_pending=10) as limited:
        before = await snapshot(pool)
        r = await limited.post(
            "/tenants/acme/jobs/report/backfill",
            json={"from": iso(start), "to": iso(start + timedelta(hours=1))},  # 12 > 10
            headers=auth,
        )
        assert_error(r, 429, "over_quota", field="tenant_id")
        assert await snapshot(pool) == before

        eight = start + 8 * FIVE_MINUTES
        assert len((await backfill(limited, auth, "report", start, eight))["runs"]) == 8
        again = await backfill(limited, auth, "report", start, eight)
        assert again["existing"] == 8  # made already: they need no room
        r = await limited.post(
            "/tenants/acme/jobs/report/backfill",
            json={"from": iso(start), "to": iso(eight + 3 * FIVE_MINUTES)},  # 3 more: 11 > 10
            headers=auth,
        )
        assert_error(r, 429, "over_quota")
        assert len((await backfill(limited, auth, "report", start, eight + 2 * FIVE_MINUTES))["runs"]) == 2


async def test_a_paused_jobs_backfill_is_held(
    pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "report", auth, schedule=EVERY_5)
    assert (await api.post("/tenants/acme/jobs/report/pause", headers=auth)).status_code == 200
    start = await two_hours_ago(pool)
    answer = await backfill(api, auth, "report", start, start + timedelta(minutes=30))
    assert len(answer["runs"]) == 6 and {r["held"] for r in answer["runs"]} == {"paused"}
    resumed = await api.post("/tenants/acme/jobs/report/resume", headers=auth)
    assert resumed.status_code == 200
    held = await pool.fetch("SELECT held FROM job_runs WHERE job = 'report'")
    assert {h["held"] for h in held} == {None}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"to": "NOW"}, "from"),
        ({"from": "HOUR_AGO"}, "to"),
        ({"from": "NAIVE", "to": "NOW"}, "from"),  # no time zone
        ({"from": "yesterday", "to": "NOW"}, "from"),
        ({"from": "HOUR_AGO", "to": 1700000000}, "to"),
        ({"from": "NOW", "to": "NOW"}, "to"),  # empty
        ({"from": "NOW", "to": "HOUR_AGO"}, "to"),
        ({"from": "PAST", "to": "NOW"}, "from"),  # beyond SCHEDULER_MAX_SCHEDULE_BEHIND_DAYS
        ({"from": "NOW", "to": "FAR"}, "to"),  # beyond SCHEDULER_MAX_SCHEDULE_AHEAD_DAYS
        ({"from": "HOUR_AGO", "to": "NOW", "job": "x"}, "job"),
        ({"start": "HOUR_AGO", "end": "NOW"}, "from"),
    ],
)
async def test_bad_ranges_are_422_naming_the_field(
    pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict, body: dict, field: str
) -> None:
    await put_job(api, "acme", "report", tenant["auth"], schedule=EVERY_5)
    now = await db_now(pool)
    moments = {
        "NOW": iso(now),
        "HOUR_AGO": iso(now - timedelta(hours=1)),
        "NAIVE": iso(now.replace(tzinfo=None) - timedelta(hours=1)),
        "PAST": iso(now - timedelta(days=8)),
        "FAR": iso(now + timedelta(days=367)),
    }
    body = {k: moments.get(v, v) if isinstance(v, str) else v for k, v in body.items()}
    before = await snapshot(pool)
    r = await api.post("/tenants/acme/jobs/report/backfill", json=body, headers=tenant["auth"])
    assert_error(r, 422, "invalid_input", field=field)
    assert await snapshot(pool) == before


async def test_a_job_without_a_schedule_or_another_tenants_job_is_refused(
    pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict, admin: dict
) -> None:
    now = datetime.now(UTC)
    body = {"from": iso(now - timedelta(hours=1)), "to": iso(now)}
    before = await snapshot(pool)
    r = await api.post("/tenants/acme/jobs/hello/backfill", json=body, headers=tenant["auth"])
    assert_error(r, 409, "conflict", field="schedule")
    r = await api.post("/tenants/acme/jobs/nope/backfill", json=body, headers=tenant["auth"])
    assert_error(r, 404, "not_found", field="name")
    r = await api.post("/tenants/other/jobs/hello/backfill", json=body, headers=tenant["auth"])
    assert r.status_code in (403, 404), r.text
    assert await snapshot(pool) == before
