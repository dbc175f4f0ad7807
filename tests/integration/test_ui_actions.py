"""The dashboard's actions over real HTTP and Postgres (the engine off, so runs stay where they are
put): reschedule a run, pause and resume a job and a tenant, bulk retry or cancel a Failures group
after its confirmation, the Runs page's time range. Each post carries the session's CSRF token; one
without it is refused and changes nothing."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx

from tests import factories
from tests.support import ADMIN_TOKEN, snapshot, submit_run
from tests.ui_support import csrf_of, ui_sign_in


async def _csrf(browser: httpx.AsyncClient) -> str:
    return csrf_of((await browser.get("/ui")).text)


async def test_reschedule_a_pending_run_from_its_page(api: httpx.AsyncClient, tenant: dict) -> None:
    run = await submit_run(api, "acme", tenant["auth"], job="hello")
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    page = await browser.get(f"/ui/runs/{run['id']}")
    assert 'type="datetime-local" name="due_at"' in page.text
    csrf = csrf_of(page.text)

    refused = await browser.post(f"/ui/runs/{run['id']}/reschedule", data={"due_at": "2031-01-01T00:00"})
    assert refused.status_code == 403
    later = (datetime.now(UTC) + timedelta(hours=3)).replace(second=0, microsecond=0)
    r = await browser.post(
        f"/ui/runs/{run['id']}/reschedule",
        data={"csrf_token": csrf, "due_at": later.strftime("%Y-%m-%dT%H:%M")},  # UTC, as the page says
    )
    assert r.status_code == 303 and r.headers["location"] == f"/ui/runs/{run['id']}"
    moved = (await api.get(f"/runs/{run['id']}", headers=tenant["auth"])).json()
    assert datetime.fromisoformat(moved["due_at"]) == later

    # Refusals are the page again, saying why as text, the run unchanged: the API's own rules.
    for typed, status, says in (
        ("not a time", 422, "not a date and time"),
        ("", 422, "give the new due time"),
        ("2999-01-01T00:00", 422, "days ahead"),
    ):
        r = await browser.post(f"/ui/runs/{run['id']}/reschedule", data={"csrf_token": csrf, "due_at": typed})
        assert r.status_code == status and says in r.text and 'role="alert"' in r.text, r.text
    await api.post(f"/runs/{run['id']}/cancel", headers=tenant["auth"])
    typed = (later + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    r = await browser.post(f"/ui/runs/{run['id']}/reschedule", data={"csrf_token": csrf, "due_at": typed})
    assert r.status_code == 409 and "only pending runs can be rescheduled" in r.text
    assert (await api.get(f"/runs/{run['id']}", headers=tenant["auth"])).json()["due_at"] == moved["due_at"]
    await browser.aclose()


async def test_pause_a_job_and_see_its_runs_held_then_resume(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    jobs = await browser.get("/ui/jobs")
    assert "priority 5" in jobs.text and "0 in flight" in jobs.text and "no concurrency limit" in jobs.text
    before = await snapshot(pool)
    assert (await browser.post("/ui/jobs/hello/pause", data={})).status_code == 403
    assert await snapshot(pool) == before

    r = await browser.post("/ui/jobs/hello/pause", data={"csrf_token": await _csrf(browser)})
    assert r.status_code == 303 and r.headers["location"] == "/ui/jobs"
    assert (await api.get("/tenants/acme/jobs/hello", headers=tenant["auth"])).json()["paused"] is True
    run = await submit_run(
        api,
        "acme",
        tenant["auth"],
        job="hello",
        scheduled_at=(datetime.now(UTC) - timedelta(seconds=5)).isoformat(),
    )
    assert await pool.fetchval("SELECT held FROM job_runs WHERE id = $1", run["id"]) == "paused"
    jobs = await browser.get("/ui/jobs")
    assert "data-paused" in jobs.text and ">Resume<" in jobs.text
    overview = await browser.get("/ui")
    assert re.search(r'data-held="paused">paused 1<', overview.text), overview.text
    page = await browser.get(f"/ui/runs/{run['id']}")
    assert "Why is this run late?" in page.text and "Held: its job is paused" in page.text

    r = await browser.post("/ui/jobs/hello/resume", data={"csrf_token": await _csrf(browser)})
    assert r.status_code == 303
    assert await pool.fetchval("SELECT held FROM job_runs WHERE id = $1", run["id"]) is None
    await browser.aclose()


async def test_the_admin_pauses_and_resumes_a_tenant(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    run = await submit_run(api, "acme", tenant["auth"], job="hello")
    mine = await ui_sign_in(str(api.base_url), tenant["api_key"])
    before = await snapshot(pool)
    r = await mine.post("/ui/tenants/acme/pause", data={"csrf_token": await _csrf(mine)})
    assert r.status_code == 404 and await snapshot(pool) == before  # the admin's only, as in the API

    admin = await ui_sign_in(str(api.base_url), ADMIN_TOKEN)
    csrf = await _csrf(admin)
    assert (await admin.post("/ui/tenants/acme/pause", data={})).status_code == 403
    assert await snapshot(pool) == before
    r = await admin.post("/ui/tenants/acme/pause", data={"csrf_token": csrf})
    assert r.status_code == 303 and r.headers["location"] == "/ui/admin"
    assert await pool.fetchval("SELECT paused FROM tenants WHERE id = 'acme'") is True
    assert await pool.fetchval("SELECT held FROM job_runs WHERE id = $1", run["id"]) == "paused"
    listed = await admin.get("/ui/admin")
    assert "data-paused" in listed.text and 'action="/ui/tenants/acme/resume"' in listed.text
    r = await admin.post("/ui/tenants/acme/resume", data={"csrf_token": csrf})
    assert r.status_code == 303
    assert await pool.fetchval("SELECT paused FROM tenants WHERE id = 'acme'") is False
    assert await pool.fetchval("SELECT held FROM job_runs WHERE id = $1", run["id"]) is None
    await mine.aclose()
    await admin.aclose()


async def _failed(conn: asyncpg.Connection, n: int, error: str, status: str = "failed") -> list[str]:
    rows = await factories.runs(conn, n, job_name="hello", status=status)
    await conn.execute(
        "UPDATE job_runs SET last_error = $2, attempt = 1 WHERE id = ANY($1::uuid[])",
        [r["id"] for r in rows],
        error,
    )
    return [str(r["id"]) for r in rows]


async def _statuses(pool: asyncpg.Pool, ids: list[str]) -> set[str]:
    return {
        r["status"] for r in await pool.fetch("SELECT status FROM job_runs WHERE id = ANY($1::uuid[])", ids)
    }


async def test_bulk_retry_and_cancel_a_failures_group_after_confirming(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    async with pool.acquire() as conn:
        timeouts = await _failed(conn, 3, "timeout after 30 s")
        others = await _failed(conn, 2, "HTTP 500")
        retrying = await _failed(conn, 2, "timeout after 30 s", status="pending")
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    failures = await browser.get("/ui/failures")
    link = re.search(r'href="(/ui/failures/confirm\?action=retry&amp;run=[^"]+)"', failures.text)
    assert link, failures.text
    confirm = await browser.get(link.group(1).replace("&amp;", "&"))
    assert confirm.status_code == 200
    run = re.search(r'name="run" value="([^"]+)"', confirm.text)
    assert run and run.group(1) in timeouts  # the most frequent group first
    assert "Retry <strong>3</strong> failed runs of job <code>hello</code>?" in confirm.text
    assert await _statuses(pool, timeouts) == {"failed"}  # asking changes nothing

    form = {"run": run.group(1), "action": "retry", "days": "1"}
    before = await snapshot(pool)
    assert (await browser.post("/ui/failures/act", data=form)).status_code == 403
    assert await snapshot(pool) == before
    r = await browser.post("/ui/failures/act", data={**form, "csrf_token": csrf_of(confirm.text)})
    assert (
        r.status_code == 303 and "matched=3" in r.headers["location"] and "changed=3" in r.headers["location"]
    )
    after = await browser.get(r.headers["location"])
    assert "Bulk retry: 3 runs matched, 3 retried." in after.text
    assert await _statuses(pool, timeouts) == {"pending"}
    assert await _statuses(pool, others) == {"failed"}  # another error's group is left alone

    # Cancel: the runs of the group's job still retrying after the same error (pending).
    cancel = await browser.get(f"/ui/failures/confirm?action=cancel&run={others[0]}&days=1")
    assert "Cancel <strong>0</strong>" not in cancel.text and "No run matches" in cancel.text
    cancel = await browser.get(f"/ui/failures/confirm?action=cancel&run={timeouts[0]}&days=1")
    # The three just retried are pending with that error too, beside the two that were retrying.
    assert "Cancel <strong>5</strong> pending, dispatched or running runs" in cancel.text
    r = await browser.post(
        "/ui/failures/act",
        data={"run": timeouts[0], "action": "cancel", "days": "1", "csrf_token": csrf_of(cancel.text)},
    )
    assert "matched=5" in r.headers["location"] and "changed=5" in r.headers["location"]
    assert await _statuses(pool, retrying + timeouts) == {"cancelled"}

    bad = await browser.post(
        "/ui/failures/act", data={"run": "nope", "action": "retry", "csrf_token": csrf_of(cancel.text)}
    )
    assert bad.status_code == 422
    await browser.aclose()


async def test_the_runs_page_filters_by_time_range(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=5)
    async with pool.acquire() as conn:
        rows = await factories.runs(conn, 5, job_name="hello", start=start, step=timedelta(hours=1))
    ids = [str(r["id"]) for r in rows]
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    after = (start + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M")
    before = (start + timedelta(hours=2, minutes=30)).strftime("%Y-%m-%dT%H:%M")
    page = await browser.get("/ui/runs", params={"scheduled_after": after, "scheduled_before": before})
    assert page.status_code == 200
    shown = set(re.findall(r'data-run="([^"]+)"', page.text))
    assert shown == {ids[1], ids[2]}
    assert f'name="scheduled_after" value="{after}"' in page.text  # the filter stays in the form
    bad = await browser.get("/ui/runs", params={"scheduled_after": "yesterday"})
    assert bad.status_code == 422 and "scheduled_after" in bad.text
    await browser.aclose()
