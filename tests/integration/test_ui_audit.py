"""The dashboard and the audit log: what a session changes is recorded as the session's doing (with
the key it signed in with), and the Audit page lists the tenant's events, paged and filtered."""

from __future__ import annotations

import re

import httpx

from tests.support import ADMIN_TOKEN, bearer, create_tenant, put_job, submit_run
from tests.ui_support import csrf_of, ui_sign_in


async def _events(api: httpx.AsyncClient, tenant: dict, **params: object) -> list[dict]:
    r = await api.get("/tenants/acme/audit", params={"limit": 500, **params}, headers=tenant["auth"])
    return list(r.json()["events"])


async def test_a_sessions_changes_are_recorded_as_the_sessions(api: httpx.AsyncClient, tenant: dict) -> None:
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    csrf = csrf_of((await browser.get("/ui")).text)
    r = await browser.post("/ui/jobs/hello/trigger", data={"csrf_token": csrf})
    assert r.status_code == 303
    run_id = r.headers["location"].rsplit("/", 1)[1]
    assert (await browser.post("/ui/jobs/hello/pause", data={"csrf_token": csrf})).status_code == 303
    definition = '{"target": {"type": "noop"}, "priority": 2}'
    r = await browser.post("/ui/jobs/hello", data={"csrf_token": csrf, "definition": definition})
    assert r.status_code == 303
    assert (await browser.post(f"/ui/runs/{run_id}/cancel", data={"csrf_token": csrf})).status_code == 303
    await submit_run(api, "acme", tenant["auth"], job="hello")  # the client's own: no event

    latest = (await _events(api, tenant))[:4]
    assert [(e["action"], e["target"]) for e in reversed(latest)] == [
        ("job.triggered", "job:hello"),
        ("job.paused", "job:hello"),
        ("job.put", "job:hello"),
        ("run.cancelled", f"run:{run_id}"),
    ]
    actors = {(e["actor"]["type"], e["actor"]["id"], e["actor"]["key_id"]) for e in latest}
    [(kind, session_id, key_id)] = actors
    assert kind == "session" and re.fullmatch(r"[0-9a-f]{16}", session_id) and key_id == tenant["key_id"]
    assert latest[-1]["detail"] == {"run_id": run_id, "created": True}

    admin = await ui_sign_in(str(api.base_url), ADMIN_TOKEN)
    r = await admin.post(
        "/ui/tenants/acme/pause", data={"csrf_token": csrf_of((await admin.get("/ui")).text)}
    )
    assert r.status_code == 303
    [paused] = await _events(api, tenant, action="tenant.paused")
    assert paused["actor"]["type"] == "session" and paused["actor"]["key_id"] is None
    assert paused["actor"]["id"] != session_id  # another session
    await browser.aclose()
    await admin.aclose()


async def test_the_audit_page_lists_pages_and_filters(api: httpx.AsyncClient, tenant: dict) -> None:
    for n in range(50):
        await put_job(api, "acme", f"job-{n:02d}", tenant["auth"])
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    home = await browser.get("/ui")
    assert 'href="/ui/audit"' in home.text  # in the nav
    first = await browser.get("/ui/audit")
    assert first.status_code == 200
    assert first.text.count("<tr data-action=") == 50  # a page
    assert 'data-action="tenant.created"' not in first.text  # the oldest is on the next page
    assert "<code>job:job-49</code>" in first.text and tenant["key_id"] in first.text
    older = re.search(r'href="(/ui/audit\?cursor=[^"]+)">Older events', first.text)
    assert older, first.text
    second = await browser.get(older.group(1).replace("&amp;", "&"))
    assert second.text.count("<tr data-action=") == 2  # job.put hello, tenant.created
    assert 'data-action="tenant.created" data-actor="admin"' in second.text
    created = await browser.get("/ui/audit", params={"action": "tenant.created"})
    assert created.text.count("<tr data-action=") == 1
    assert (await browser.get("/ui/audit", params={"action": "nonsense"})).status_code == 422

    await create_tenant(api, "beta")
    assert (await browser.get("/ui/audit", params={"tenant": "beta"})).status_code == 404
    admin = await ui_sign_in(str(api.base_url), ADMIN_TOKEN)
    assert (await admin.get("/ui/audit")).status_code == 422  # the admin chooses a tenant first
    beta = await admin.get("/ui/audit", params={"tenant": "beta"})
    assert beta.text.count("<tr data-action=") == 1 and 'href="/ui/audit?tenant=beta"' in beta.text
    assert (await api.get("/tenants/beta/audit", headers=bearer(ADMIN_TOKEN))).status_code == 200
    await browser.aclose()
    await admin.aclose()
