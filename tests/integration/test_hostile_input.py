"""Input a hostile tenant sends (issues 12 and 13): each is a 4xx naming the field, writes nothing,
and leaves a well-behaved tenant beside it untouched."""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from app.config import Settings
from app.db import partitions
from app.engine.partitions import PartitionMaintenance
from tests.support import api_client, bearer, create_tenant, put_job, snapshot, submit_run
from tests.ui_support import csrf_of, ui_sign_in


def nested(depth: int) -> object:
    """A payload of `depth` nested arrays: [[[...]]]."""
    value: object = []
    for _ in range(depth - 1):
        value = [value]
    return value


def deep_json(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.fixture
async def calm(api: httpx.AsyncClient, tenant: dict) -> dict[str, str]:
    """A well-behaved tenant beside the hostile `acme`, with one run already pending."""
    auth = bearer((await create_tenant(api, "calm"))["api_key"])
    await put_job(api, "calm", "hello", auth)
    await submit_run(api, "calm", auth, job="hello", payload={"ok": True})
    return auth


async def assert_calm_unharmed(api: httpx.AsyncClient, calm: dict[str, str]) -> None:
    r = await api.get("/tenants/calm/runs", headers=calm)
    assert r.status_code == 200 and [run["payload"] for run in r.json()["runs"]] == [{"ok": True}]
    await submit_run(api, "calm", calm, job="hello")


def refused(r: httpx.Response, status: int, field: str) -> None:
    assert r.status_code == status, r.text
    assert r.json()["field"] == field, r.text


# ─── payload depth: one rule for job PUT, run POST and batch ───


async def test_a_payload_nested_too_deep_is_refused_at_every_door(
    api: httpx.AsyncClient, tenant: dict, calm: dict[str, str], pool: asyncpg.Pool
) -> None:
    auth = {**tenant["auth"], "Content-Type": "application/json"}
    before = await snapshot(pool)
    # 254 deep stored fine and killed the engines later; 253 in a batch was a 500 with a run written.
    body = b'{"target": {"type": "noop"}, "payload": ' + deep_json(254) + b"}"
    refused(await api.put("/tenants/acme/jobs/deep", content=body, headers=auth), 422, "payload")
    body = b'{"job": "hello", "payload": ' + deep_json(253) + b"}"
    refused(await api.post("/tenants/acme/runs", content=body, headers=auth), 422, "payload")
    body = b'{"runs": [{"job": "hello"}, {"job": "hello", "payload": ' + deep_json(253) + b"}]}"
    refused(await api.post("/tenants/acme/runs/batch", content=body, headers=auth), 422, "runs[1].payload")
    assert await snapshot(pool) == before

    # The bound is SCHEDULER_MAX_PAYLOAD_DEPTH (32): at it, accepted; one more, refused.
    await put_job(api, "acme", "at-limit", tenant["auth"], payload=nested(32))
    refused(
        await api.put(
            "/tenants/acme/jobs/over", json={"target": {"type": "noop"}, "payload": nested(33)}, headers=auth
        ),
        422,
        "payload",
    )
    run = await submit_run(api, "acme", tenant["auth"], job="at-limit")
    assert run["payload"] == nested(32)
    r = await api.post(
        "/tenants/acme/runs", json={"job": "hello", "payload": {"a": nested(32)}}, headers=auth
    )
    refused(r, 422, "payload")
    # The tenant's own reads keep working (a stored deep run made them 500), and so does its neighbour's.
    r = await api.get("/tenants/acme/runs", headers=tenant["auth"])
    assert r.status_code == 200 and len(r.json()["runs"]) == 1
    await assert_calm_unharmed(api, calm)


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400"])
async def test_numbers_json_cannot_carry_are_refused_not_stored_as_null(
    api: httpx.AsyncClient, tenant: dict, calm: dict[str, str], pool: asyncpg.Pool, number: bytes
) -> None:
    auth = {**tenant["auth"], "Content-Type": "application/json"}
    before = await snapshot(pool)
    r = await api.post(
        "/tenants/acme/runs", content=b'{"job": "hello", "payload": {"x": ' + number + b"}}", headers=auth
    )
    refused(r, 422, "payload")
    body = b'{"runs": [{"job": "hello", "payload": [1, ' + number + b"]}]}"
    refused(await api.post("/tenants/acme/runs/batch", content=body, headers=auth), 422, "runs[0].payload")
    body = b'{"target": {"type": "noop"}, "payload": ' + number + b"}"
    refused(await api.put("/tenants/acme/jobs/nan", content=body, headers=auth), 422, "payload")
    assert await snapshot(pool) == before
    await assert_calm_unharmed(api, calm)


# ─── other 500s from input ───


async def test_a_cursor_past_year_9999_is_422(api: httpx.AsyncClient, tenant: dict) -> None:
    for at in ("9999-12-31T23:59:59-14:00", "2026-01-01T00:00:00"):  # overflows in UTC; no zone
        cursor = base64.urlsafe_b64encode(f"{at}|{uuid.uuid4()}".encode()).decode()
        r = await api.get("/tenants/acme/runs", params={"cursor": cursor}, headers=tenant["auth"])
        refused(r, 422, "cursor")


# Moments that have no UTC form: converted by the database driver, an OverflowError, a 500.
NO_UTC_FORM = ("9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00")


async def test_a_moment_without_a_utc_form_is_a_422_naming_its_field_wherever_one_is_accepted(
    api: httpx.AsyncClient, tenant: dict, calm: dict[str, str], pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    run = await submit_run(api, "acme", auth, job="hello")
    before = await snapshot(pool)
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    csrf = csrf_of((await browser.get(f"/ui/runs/{run['id']}")).text)
    for at in NO_UTC_FORM:
        for name in ("scheduled_after", "scheduled_before"):
            refused(await api.get("/tenants/acme/runs", params={name: at}, headers=auth), 422, name)
            action = {"action": "cancel", "filter": {name: at}}
            r = await api.post("/tenants/acme/runs/actions", json=action, headers=auth)
            refused(r, 422, f"filter.{name}")
            r = await browser.get("/ui/runs", params={name: at})  # the dashboard's filter: the same rule
            assert r.status_code == 422 and f"{name}: a moment between the years 1 and 9999" in r.text, r.text
        refused(
            await api.post(f"/runs/{run['id']}/reschedule", json={"due_at": at}, headers=auth), 422, "due_at"
        )
        r = await browser.post(f"/ui/runs/{run['id']}/reschedule", data={"csrf_token": csrf, "due_at": at})
        assert r.status_code == 422 and "due_at: a moment between the years 1 and 9999" in r.text, r.text
        r = await api.post("/tenants/acme/runs", json={"job": "hello", "scheduled_at": at}, headers=auth)
        refused(r, 422, "scheduled_at")
        batch = {"runs": [{"job": "hello"}, {"job": "hello", "scheduled_at": at}]}
        refused(
            await api.post("/tenants/acme/runs/batch", json=batch, headers=auth), 422, "runs[1].scheduled_at"
        )
    await browser.aclose()
    assert await snapshot(pool) == before
    # The first and the last moment that have one are fine.
    edges = {"scheduled_after": "0001-01-01T00:00:00Z", "scheduled_before": "9999-12-31T23:59:59Z"}
    r = await api.get("/tenants/acme/runs", params=edges, headers=auth)
    assert r.status_code == 200 and [listed["id"] for listed in r.json()["runs"]] == [run["id"]], r.text
    await assert_calm_unharmed(api, calm)


async def test_a_job_url_with_an_overlong_host_label_is_422(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    before = await snapshot(pool)
    target = {"type": "http", "url": f"http://{'a' * 300}.example.com/hook"}
    r = await api.put("/tenants/acme/jobs/idna", json={"target": target}, headers=tenant["auth"])
    refused(r, 422, "target.url")
    assert await snapshot(pool) == before


async def test_a_tenant_id_with_a_nul_is_4xx_for_the_admin(api: httpx.AsyncClient, admin: dict) -> None:
    for path in ("/tenants/x%00y/jobs", "/tenants/x%00y/runs", "/tenants/x%00y/jobs/a"):
        r = await api.get(path, headers=admin)
        refused(r, 422, "tenant_id")


async def test_no_redirect_echoes_the_host_header(api: httpx.AsyncClient, tenant: dict) -> None:
    r = await api.get("/tenants/acme/runs/", headers={**tenant["auth"], "Host": "evil.example"})
    assert r.status_code == 404 and "location" not in r.headers, (r.status_code, r.headers)


# ─── batches are all or nothing (issue 13, 1) ───


@pytest.mark.parametrize("keyed", [False, True])
async def test_a_batch_with_an_unknown_job_writes_nothing(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, keyed: bool
) -> None:
    runs: list[dict[str, object]] = [{"job": "hello"}, {"job": "nope"}, {"job": "hello"}]
    if keyed:
        runs = [{**r, "idempotency_key": f"k{i}"} for i, r in enumerate(runs)]
    before = await snapshot(pool)
    r = await api.post("/tenants/acme/runs/batch", json={"runs": runs}, headers=tenant["auth"])
    refused(r, 422, "runs[1].job")
    assert await snapshot(pool) == before
    # Fixed and resent, it makes exactly its runs: no duplicates of a half-written first try.
    runs[1]["job"] = "hello"
    r = await api.post("/tenants/acme/runs/batch", json={"runs": runs}, headers=tenant["auth"])
    assert r.status_code == 201, r.text
    assert await pool.fetchval("SELECT count(*) FROM job_runs") == 3


# ─── a body without Content-Type (issue 13, 10) ───


async def test_a_json_body_without_content_type_is_read_as_json(api: httpx.AsyncClient, tenant: dict) -> None:
    r = await api.post(
        "/tenants/acme/runs", content=b'{"job": "hello", "payload": {"n": 1}}', headers=tenant["auth"]
    )
    assert r.status_code == 201, r.text
    assert r.json()["payload"] == {"n": 1}
    # A body declared as something else says which header is wrong.
    r = await api.post(
        "/tenants/acme/runs",
        content=b'{"job": "hello"}',
        headers={**tenant["auth"], "Content-Type": "application/x-www-form-urlencoded"},
    )
    refused(r, 415, "content-type")
    # No body, nothing to misread: a stray Content-Type on a GET is no error.
    r = await api.get("/tenants/acme/runs", headers={**tenant["auth"], "Content-Type": "text/plain"})
    assert r.status_code == 200, r.text


# ─── jobs per tenant (issue 12, 6) ───


async def test_the_tenants_job_limit_is_refused_at_put(settings: Settings, pool: asyncpg.Pool) -> None:
    import asyncio

    async with api_client(settings, tenant_max_jobs=3) as api:
        auth = bearer((await create_tenant(api, "acme"))["api_key"])
        other = bearer((await create_tenant(api, "calm"))["api_key"])
        # Concurrent creates cannot race past the limit.
        puts = [
            api.put(f"/tenants/acme/jobs/j{i}", json={"target": {"type": "noop"}}, headers=auth)
            for i in range(10)
        ]
        codes = sorted(r.status_code for r in await asyncio.gather(*puts))
        assert codes == [201] * 3 + [422] * 7, codes
        assert await pool.fetchval("SELECT count(*) FROM jobs WHERE tenant_id = 'acme'") == 3
        r = await api.put("/tenants/acme/jobs/more", json={"target": {"type": "noop"}}, headers=auth)
        refused(r, 422, "name")
        # Replacing one of its jobs adds nothing and is fine; another tenant has its own limit.
        name = await pool.fetchval("SELECT name FROM jobs WHERE tenant_id = 'acme' LIMIT 1")
        r = await api.put(
            f"/tenants/acme/jobs/{name}", json={"target": {"type": "noop"}, "max_attempts": 5}, headers=auth
        )
        assert r.status_code == 200, r.text
        await put_job(api, "calm", "hello", other)


# ─── far-future runs and partitions (issue 12, 11) ───


async def test_runs_far_ahead_do_not_make_a_partition_each(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    now = datetime.now(UTC)
    runs = [{"job": "hello", "scheduled_at": (now + timedelta(days=d)).isoformat()} for d in range(8, 367)]
    r = await api.post("/tenants/acme/runs/batch", json={"runs": runs}, headers=tenant["auth"])
    assert r.status_code == 201, r.text
    before = await pool.fetchval("SELECT count(*) FROM pg_inherits WHERE inhparent = 'job_runs'::regclass")
    await PartitionMaintenance(settings, pool).step()
    after = await pool.fetchval("SELECT count(*) FROM pg_inherits WHERE inhparent = 'job_runs'::regclass")
    # No day past the calendar's (today + PREMAKE_DAYS) got a partition: the far runs wait in DEFAULT.
    # (Counted by day, not in all: a database made before midnight UTC keeps its yesterday too.)
    assert after - before <= 2, (before, after)
    async with pool.acquire() as conn:
        latest = max(await partitions.list_day_partitions(conn))
        today = await conn.fetchval("SELECT (now() AT TIME ZONE 'UTC')::date")
    assert latest <= today + timedelta(days=settings.premake_days), (latest, today)
    assert await pool.fetchval("SELECT count(*) FROM job_runs_default") >= 358
    some = r.json()["runs"][200]
    assert (await api.get(f"/runs/{some['id']}", headers=tenant["auth"])).status_code == 200
    # Past SCHEDULER_MAX_SCHEDULE_AHEAD_DAYS: refused.
    late = (now + timedelta(days=settings.max_schedule_ahead_days + 1)).isoformat()
    r = await api.post(
        "/tenants/acme/runs", json={"job": "hello", "scheduled_at": late}, headers=tenant["auth"]
    )
    refused(r, 422, "scheduled_at")
