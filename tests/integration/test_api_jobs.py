"""Jobs: upsert, read, list, delete (cancelling pending runs), target/schedule/time zone checks and
next_fire_at."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import asyncpg
import httpx
import pytest

from app.config import Settings
from tests.support import (
    api_client,
    assert_error,
    bearer,
    count_rows,
    create_tenant,
    put_job,
    snapshot,
    submit_run,
)

JOB_FIELDS = {
    "tenant_id",
    "name",
    "target",
    "schedule",
    "timezone",
    "payload",
    "callback",
    "tags",
    "on_events",
    "max_attempts",
    "backoff_seconds",
    "timeout_seconds",
    "expire_after_seconds",
    "misfire",
    "paused",
    "priority",
    "next_fire_at",
    "created_at",
    "updated_at",
    "concurrency",
    "in_flight",
    "rate_limit",
    "overlap",
    "jitter_seconds",
    "pause_after_failures",
    "paused_reason",
    "consecutive_failures",
    "unique",
    "debounce",
}


def at(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def test_upsert_creates_then_replaces(api: httpx.AsyncClient, tenant: dict) -> None:
    body = {"target": {"type": "noop"}, "payload": {"v": 1}, "max_attempts": 5}
    r = await api.put("/tenants/acme/jobs/report", json=body, headers=tenant["auth"])
    assert r.status_code == 201, r.text
    job = r.json()
    assert set(job) == JOB_FIELDS
    assert job["tenant_id"] == "acme" and job["name"] == "report"
    assert job["payload"] == {"v": 1} and job["max_attempts"] == 5
    assert job["schedule"] is None and job["next_fire_at"] is None and job["timezone"] == "UTC"
    assert job["misfire"] == "latest" and job["paused"] is False

    r = await api.put("/tenants/acme/jobs/report", json={**body, "payload": {"v": 2}}, headers=tenant["auth"])
    assert r.status_code == 200, r.text
    replaced = r.json()
    assert replaced["payload"] == {"v": 2} and replaced["max_attempts"] == 5
    assert replaced["created_at"] == job["created_at"]
    assert at(replaced["updated_at"]) >= at(job["updated_at"])

    got = await api.get("/tenants/acme/jobs/report", headers=tenant["auth"])
    assert got.status_code == 200 and got.json() == replaced


async def test_get_unknown_job_is_404(api: httpx.AsyncClient, tenant: dict) -> None:
    assert_error(
        await api.get("/tenants/acme/jobs/nope", headers=tenant["auth"]), 404, "not_found", field="name"
    )


async def test_put_job_of_unknown_tenant_is_404(
    api: httpx.AsyncClient, admin: dict, pool: asyncpg.Pool
) -> None:
    r = await api.put("/tenants/nobody/jobs/x", json={"target": {"type": "noop"}}, headers=admin)
    assert_error(r, 404, "not_found", field="tenant_id")
    assert await count_rows(pool, "jobs") == 0


async def test_list_is_paginated_by_name(api: httpx.AsyncClient, tenant: dict) -> None:
    names = ["hello", *(f"job-{i:02d}" for i in range(6))]
    for name in names[1:]:
        await put_job(api, "acme", name, tenant["auth"])
    other = bearer((await create_tenant(api, "other"))["api_key"])
    await put_job(api, "other", "not-acmes", other)

    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        r = await api.get("/tenants/acme/jobs", params=params, headers=tenant["auth"])
        assert r.status_code == 200, r.text
        page = r.json()
        assert len(page["jobs"]) <= 3
        seen += [j["name"] for j in page["jobs"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(names)
    assert pages == 3  # 3 + 3 + 1


async def test_delete_is_204_then_404_and_cancels_pending_runs(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    await put_job(api, "acme", "doomed", tenant["auth"])
    pending = [await submit_run(api, "acme", tenant["auth"], job="doomed") for _ in range(3)]
    dispatched = await submit_run(api, "acme", tenant["auth"], job="doomed")
    running = await submit_run(api, "acme", tenant["auth"], job="doomed")
    await pool.execute("UPDATE job_runs SET status = 'dispatched', epoch = 1 WHERE id = $1", dispatched["id"])
    await pool.execute("UPDATE job_runs SET status = 'running', epoch = 1 WHERE id = $1", running["id"])
    survivor = await submit_run(api, "acme", tenant["auth"], job="hello")

    r = await api.delete("/tenants/acme/jobs/doomed", headers=tenant["auth"])
    assert r.status_code == 204 and r.content == b""
    assert_error(await api.get("/tenants/acme/jobs/doomed", headers=tenant["auth"]), 404, "not_found")
    assert_error(
        await api.delete("/tenants/acme/jobs/doomed", headers=tenant["auth"]), 404, "not_found", field="name"
    )

    async def status(run: dict) -> str:
        r = await api.get(f"/runs/{run['id']}", headers=tenant["auth"])
        assert r.status_code == 200, r.text
        return str(r.json()["status"])

    for run in [*pending, dispatched]:
        assert await status(run) == "cancelled"
    assert await status(running) == "running"  # a started attempt runs to its end
    assert await status(survivor) == "pending"  # another job's runs are untouched


# ─── targets ───


@pytest.mark.parametrize(
    "target",
    [
        {"type": "http", "url": "http://127.0.0.1:9/hook"},  # private is allowed in tests (dev)
        {"type": "http", "url": "https://localhost/hook", "method": "PUT", "headers": {"X-Token": "t"}},
        {"type": "python", "handler": "echo"},
        {"type": "noop"},
    ],
    ids=["http", "http-with-method-and-headers", "python-registered", "noop"],
)
async def test_valid_targets_are_accepted(api: httpx.AsyncClient, tenant: dict, target: dict) -> None:
    r = await api.put("/tenants/acme/jobs/t", json={"target": target}, headers=tenant["auth"])
    assert r.status_code == 201, r.text
    assert r.json()["target"]["type"] == target["type"]


@pytest.mark.parametrize(
    ("target", "field"),
    [
        ({"type": "python", "handler": "os.system"}, "target.handler"),
        ({"type": "python", "handler": "app.worker.handlers:echo"}, "target.handler"),
        ({"type": "python"}, "target.handler"),
        ({"type": "ftp", "url": "ftp://example.com"}, "target"),
        ({"url": "https://example.com"}, "target"),
        ({"type": "http", "url": "not a url"}, "target.url"),
        ({"type": "http", "url": "file:///etc/passwd"}, "target.url"),
        ({"type": "http", "url": "http://user:pw@127.0.0.1/"}, "target.url"),
        ({"type": "http", "url": "http://127.0.0.1/", "method": "TRACE"}, "target.method"),
        (
            {"type": "http", "url": "http://127.0.0.1/", "headers": {"Scheduler-Run-Id": "x"}},
            "target.headers",
        ),
        ({"type": "http", "url": "http://127.0.0.1/", "extra": 1}, "target.extra"),
        ({"type": "noop", "handler": "echo"}, "target.handler"),
    ],
    ids=[
        "unregistered-handler",
        "import-path-handler",
        "handler-missing",
        "unknown-type",
        "type-missing",
        "bad-url",
        "file-url",
        "credentials-in-url",
        "bad-method",
        "reserved-header",
        "unknown-field",
        "noop-with-field",
    ],
)
async def test_bad_targets_are_422_naming_the_field(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, target: dict, field: str
) -> None:
    before = await snapshot(pool)
    r = await api.put("/tenants/acme/jobs/t", json={"target": target}, headers=tenant["auth"])
    assert_error(r, 422, "invalid_input", field=field)
    assert await snapshot(pool) == before


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/hook",
        "http://localhost:8080/hook",
        "http://10.1.2.3/",
        "http://192.168.0.10/",
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",  # IPv4-mapped loopback
        "http://0.0.0.0/",
    ],
)
async def test_private_webhooks_are_refused_unless_allowed(
    settings: Settings, pool: asyncpg.Pool, url: str
) -> None:
    async with api_client(settings, allow_private_targets=False) as api:
        auth = bearer((await create_tenant(api, "acme"))["api_key"])
        r = await api.put("/tenants/acme/jobs/t", json={"target": {"type": "http", "url": url}}, headers=auth)
        assert_error(r, 422, "invalid_input", field="target.url")
        assert await count_rows(pool, "jobs") == 0
        # A public address is fine under the same settings (an IP literal: no DNS needed).
        public = {"type": "http", "url": "https://93.184.215.14/hook"}
        r = await api.put("/tenants/acme/jobs/t", json={"target": public}, headers=auth)
        assert r.status_code == 201, r.text


# ─── schedules and next_fire_at ───


async def test_cron_job_gets_next_fire_in_the_future(api: httpx.AsyncClient, tenant: dict) -> None:
    job = await put_job(api, "acme", "tick", tenant["auth"], schedule="*/5 * * * *")
    assert job["schedule"] == "*/5 * * * *"
    fire = at(str(job["next_fire_at"]))
    now = datetime.now(UTC)
    assert now < fire <= now + timedelta(minutes=5, seconds=5)
    assert fire.minute % 5 == 0 and fire.second == 0 and fire.microsecond == 0


async def test_next_fire_follows_the_time_zone(api: httpx.AsyncClient, tenant: dict) -> None:
    job = await put_job(
        api, "acme", "morning", tenant["auth"], schedule="30 9 * * *", timezone="Asia/Kolkata"
    )
    local = at(str(job["next_fire_at"])).astimezone(ZoneInfo("Asia/Kolkata"))
    assert (local.hour, local.minute) == (9, 30)
    assert at(str(job["next_fire_at"])) > datetime.now(UTC)


async def test_changing_the_schedule_recomputes_next_fire(api: httpx.AsyncClient, tenant: dict) -> None:
    yearly = await put_job(api, "acme", "tick", tenant["auth"], schedule="0 0 1 1 *")
    assert (at(str(yearly["next_fire_at"])).month, at(str(yearly["next_fire_at"])).day) == (1, 1)
    every_minute = await put_job(api, "acme", "tick", tenant["auth"], schedule="* * * * *")
    fire = at(str(every_minute["next_fire_at"]))
    assert datetime.now(UTC) < fire <= datetime.now(UTC) + timedelta(seconds=61)
    unscheduled = await put_job(api, "acme", "tick", tenant["auth"], schedule=None)
    assert unscheduled["next_fire_at"] is None


async def test_paused_job_has_no_next_fire(api: httpx.AsyncClient, tenant: dict) -> None:
    paused = await put_job(api, "acme", "tick", tenant["auth"], schedule="*/5 * * * *", paused=True)
    assert paused["paused"] is True and paused["next_fire_at"] is None
    resumed = await put_job(api, "acme", "tick", tenant["auth"], schedule="*/5 * * * *", paused=False)
    assert at(str(resumed["next_fire_at"])) > datetime.now(UTC)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"schedule": "not a cron"}, "schedule"),
        ({"schedule": "61 * * * *"}, "schedule"),
        ({"schedule": "* * * *"}, "schedule"),
        ({"schedule": ""}, "schedule"),
        ({"schedule": "0 0 30 2 *"}, "schedule"),  # February 30th never comes
        ({"timezone": "Mars/Olympus_Mons"}, "timezone"),
        ({"timezone": ""}, "timezone"),
        ({"timezone": "../../etc/passwd"}, "timezone"),
        ({"misfire": "sometimes"}, "misfire"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
        ({"backoff_seconds": -1}, "backoff_seconds"),
        ({"priority": 10}, "priority"),
        ({"priority": -1}, "priority"),
        ({"priority": "0"}, "priority"),
        ({"priority": None}, "priority"),
        ({"retries": 3}, "retries"),  # unknown field
        ({"overlap": "never"}, "overlap"),
        ({"overlap": None}, "overlap"),
        ({"schedule": None, "overlap": "skip"}, "overlap"),  # overlap is a schedule's
        ({"jitter_seconds": 3601}, "jitter_seconds"),
        ({"jitter_seconds": -1}, "jitter_seconds"),
        ({"jitter_seconds": 1.5}, "jitter_seconds"),
        ({"schedule": None, "jitter_seconds": 30}, "jitter_seconds"),
        ({"pause_after_failures": 0}, "pause_after_failures"),
        ({"pause_after_failures": 1001}, "pause_after_failures"),
        ({"pause_after_failures": "3x"}, "pause_after_failures"),
        ({"paused_reason": "failures"}, "paused_reason"),  # the service's, not the caller's
        ({"consecutive_failures": 0}, "consecutive_failures"),
    ],
)
async def test_bad_job_fields_are_422_naming_the_field(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, fields: dict, field: str
) -> None:
    before = await snapshot(pool)
    body = {"target": {"type": "noop"}, "schedule": "*/5 * * * *", **fields}
    r = await api.put("/tenants/acme/jobs/t", json=body, headers=tenant["auth"])
    assert_error(r, 422, "invalid_input", field=field)
    assert await snapshot(pool) == before


@pytest.mark.parametrize("name", ["-starts-with-dash", "has space", "a" * 129, "caf\u00e9"])
async def test_bad_job_name_is_422(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, name: str
) -> None:
    r = await api.put(f"/tenants/acme/jobs/{name}", json={"target": {"type": "noop"}}, headers=tenant["auth"])
    assert_error(r, 422, "invalid_input", field="name")
    assert await count_rows(pool, "jobs") == 1  # only the fixture's `hello`
