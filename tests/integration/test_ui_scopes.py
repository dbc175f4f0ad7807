"""The dashboard under a scoped key: a session does what its key may (app.api.scopes). Signed in with
a read-only key it shows every page but no action, and refuses every form post (403, nothing
written), its CSRF token right; a key with every scope sees the actions, so the pages do draw them."""

from __future__ import annotations

import re

import asyncpg
import httpx
import pytest

from app.api.scopes import ANY_SESSION, ROUTE_SCOPES
from tests.integration.test_ui_actions import _failed
from tests.support import ADMIN_TOKEN, bearer, snapshot, submit_run
from tests.ui_support import csrf_of, ui_sign_in

FORM_POSTS = sorted(
    p for (m, p), s in ROUTE_SCOPES.items() if m == "POST" and p.startswith("/ui") and s != ANY_SESSION
)
ACTIONS = re.compile(r'<form method="post" action="(?!/ui/logout)|/ui/failures/confirm|>Edit<')


async def _session(api: httpx.AsyncClient, scopes: list[str]) -> httpx.AsyncClient:
    r = await api.post("/tenants/acme/keys", json={"scopes": scopes}, headers=bearer(ADMIN_TOKEN))
    assert r.status_code == 201, r.text
    return await ui_sign_in(str(api.base_url), r.json()["api_key"])


async def _pages(browser: httpx.AsyncClient, run_id: str) -> dict[str, str]:
    pages = {}
    for url in ("/ui", "/ui/runs", f"/ui/runs/{run_id}", "/ui/jobs", "/ui/jobs/hello", "/ui/failures"):
        r = await browser.get(url)
        assert r.status_code == 200, (url, r.text)
        pages[url] = r.text
    return pages


@pytest.fixture
async def failed_run(tenant: dict, pool: asyncpg.Pool) -> str:
    async with pool.acquire() as conn:
        [run_id] = await _failed(conn, 1, "HTTP 500")
    return run_id


async def test_a_read_only_session_shows_no_action(
    api: httpx.AsyncClient, tenant: dict, failed_run: str
) -> None:
    pending = await submit_run(api, "acme", tenant["auth"], job="hello")
    everything = await ui_sign_in(str(api.base_url), tenant["api_key"])
    read_only = await _session(api, ["runs:read", "jobs:read"])
    for run_id in (failed_run, str(pending["id"])):
        full = await _pages(everything, run_id)
        assert any(ACTIONS.search(html) for html in full.values())
        for url, html in (await _pages(read_only, run_id)).items():
            assert not ACTIONS.search(html), (url, html)
            assert 'action="/ui/logout"' in html  # signing out stays
    job = await read_only.get("/ui/jobs/hello")
    assert '<pre id="definition">' in job.text and "<textarea" not in job.text
    await everything.aclose()
    await read_only.aclose()


async def test_a_read_only_session_has_every_form_post_refused(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, failed_run: str
) -> None:
    pending = await submit_run(api, "acme", tenant["auth"], job="hello")
    read_only = await _session(api, ["runs:read", "jobs:read"])
    csrf = csrf_of((await read_only.get("/ui")).text)
    values = {"run_id": str(pending["id"]), "name": "hello", "tenant_id": "acme"}
    form = {
        "csrf_token": csrf,
        "due_at": "2031-01-01T00:00",
        "definition": '{"target": {"type": "noop"}}',
        "run": failed_run,
        "action": "retry",
        "days": "1",
    }
    before = await snapshot(pool)
    for path in FORM_POSTS:
        r = await read_only.post(path.format(**values), data=form)
        if path.startswith("/ui/tenants/"):  # the admin's alone: a tenant's session gets 404
            assert r.status_code == 404, (path, r.text)
        else:
            assert r.status_code == 403 and "lacks the scope" in r.text, (path, r.status_code, r.text)
    confirm = await read_only.get(f"/ui/failures/confirm?run={failed_run}&action=retry")
    assert confirm.status_code == 403
    assert await snapshot(pool) == before
    r = await read_only.post("/ui/logout", data={"csrf_token": csrf})
    assert r.status_code == 303
    await read_only.aclose()


async def test_each_scope_opens_its_own_pages_and_forms(api: httpx.AsyncClient, tenant: dict) -> None:
    runs_only = await _session(api, ["runs:read", "runs:write"])
    assert (await runs_only.get("/ui/runs")).status_code == 200
    jobs_page = await runs_only.get("/ui/jobs")
    assert jobs_page.status_code == 403 and "lacks the scope jobs:read" in jobs_page.text
    csrf = csrf_of((await runs_only.get("/ui")).text)
    r = await runs_only.post("/ui/jobs/hello/trigger", data={"csrf_token": csrf})
    assert r.status_code == 303 and r.headers["location"].startswith("/ui/runs/")
    assert (await runs_only.post("/ui/jobs/hello/pause", data={"csrf_token": csrf})).status_code == 403

    jobs_only = await _session(api, ["jobs:read", "jobs:write"])
    assert (await jobs_only.get("/ui/runs")).status_code == 403
    page = (await jobs_only.get("/ui/jobs")).text
    assert ">Pause<" in page and "Trigger now" not in page
    csrf = csrf_of(page)
    assert (await jobs_only.post("/ui/jobs/hello/pause", data={"csrf_token": csrf})).status_code == 303
    assert (await jobs_only.post("/ui/jobs/hello/trigger", data={"csrf_token": csrf})).status_code == 403
    await runs_only.aclose()
    await jobs_only.aclose()


async def test_the_admin_page_shows_each_keys_scopes(api: httpx.AsyncClient, tenant: dict) -> None:
    await _session(api, ["runs:read", "jobs:read"])
    admin = await ui_sign_in(str(api.base_url), ADMIN_TOKEN)
    row = (await admin.get("/ui/admin")).text
    assert "<small data-scopes>runs:read jobs:read</small>" in row
    assert "<small data-scopes>runs:read runs:write jobs:read jobs:write tenant:admin</small>" in row
    await admin.aclose()
