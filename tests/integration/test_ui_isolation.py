"""Route isolation of the dashboard, like test_api_auth's CASES for the API: every /ui route has a
case; another tenant's session gets 404 and changes nothing; no session is sent to sign in."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import asyncpg
import httpx
import pytest
from fastapi.routing import iter_route_contexts

from app.config import Settings
from app.main import create_app
from tests.integration import test_api_auth
from tests.integration.test_api_auth import Victim
from tests.support import create_tenant, snapshot
from tests.ui_support import csrf_of, ui_sign_in

UI_ROUTES = sorted(
    (method, route.path)
    for route in iter_route_contexts(create_app(Settings()).routes)
    if route.path.startswith("/ui") and route.path != "/ui/static"
    for method in route.methods - {"HEAD"}
)


# The API table's victim (tenant alpha, its job and a pending run) is this table's too.
alpha = test_api_auth.victim
Request = tuple[str, dict[str, str] | None]  # (url, form fields; the session's CSRF token is added)
# Signing in and out act on no tenant's data: their own tests are in test_ui_security.py.
NOT_TENANT_DATA = {
    ("GET", "/ui/login"),
    ("POST", "/ui/login"),
    ("GET", "/ui/login/{link}"),
    ("POST", "/ui/logout"),
}
CASES: dict[tuple[str, str], Callable[[Victim], Request]] = {
    ("GET", "/ui"): lambda v: ("/ui", None),  # the intruder's own overview: checked for no leak
    ("GET", "/ui/runs"): lambda v: (f"/ui/runs?tenant={v.tenant}", None),
    ("GET", "/ui/runs/{run_id}"): lambda v: (f"/ui/runs/{v.run_id}", None),
    ("POST", "/ui/runs/{run_id}/cancel"): lambda v: (f"/ui/runs/{v.run_id}/cancel", {}),
    ("POST", "/ui/runs/{run_id}/retry"): lambda v: (f"/ui/runs/{v.run_id}/retry", {}),
    ("GET", "/ui/jobs"): lambda v: (f"/ui/jobs?tenant={v.tenant}", None),
    ("GET", "/ui/jobs/{name}"): lambda v: (f"/ui/jobs/{v.job}?tenant={v.tenant}", None),
    ("POST", "/ui/jobs/{name}"): lambda v: (
        f"/ui/jobs/{v.job}",
        {"tenant": v.tenant, "definition": '{"target": {"type": "noop"}, "payload": {"owned": "by bravo"}}'},
    ),
    ("POST", "/ui/jobs/{name}/trigger"): lambda v: (f"/ui/jobs/{v.job}/trigger", {"tenant": v.tenant}),
    ("POST", "/ui/runs/{run_id}/reschedule"): lambda v: (
        f"/ui/runs/{v.run_id}/reschedule",
        {"due_at": "2030-01-01T00:00"},
    ),
    ("POST", "/ui/jobs/{name}/pause"): lambda v: (f"/ui/jobs/{v.job}/pause", {"tenant": v.tenant}),
    ("POST", "/ui/jobs/{name}/resume"): lambda v: (f"/ui/jobs/{v.job}/resume", {"tenant": v.tenant}),
    ("POST", "/ui/tenants/{tenant_id}/pause"): lambda v: (f"/ui/tenants/{v.tenant}/pause", {}),
    ("POST", "/ui/tenants/{tenant_id}/resume"): lambda v: (f"/ui/tenants/{v.tenant}/resume", {}),
    ("GET", "/ui/failures"): lambda v: (f"/ui/failures?tenant={v.tenant}", None),
    # A Failures group is named by one of its runs: another tenant's is not found.
    ("GET", "/ui/failures/confirm"): lambda v: (
        f"/ui/failures/confirm?run={v.cancelled_run_id}&action=retry",
        None,
    ),
    ("POST", "/ui/failures/act"): lambda v: (
        "/ui/failures/act",
        {"run": v.cancelled_run_id, "action": "retry", "days": "1"},
    ),
    ("GET", "/ui/admin"): lambda v: ("/ui/admin", None),
    ("GET", "/ui/groups"): lambda v: (f"/ui/groups?tenant={v.tenant}", None),
    ("GET", "/ui/groups/{group_id}"): lambda v: (f"/ui/groups/{v.group_id}?tenant={v.tenant}", None),
    ("GET", "/ui/audit"): lambda v: (f"/ui/audit?tenant={v.tenant}", None),
}


def test_every_ui_route_has_a_case() -> None:
    assert set(UI_ROUTES) == set(CASES) | NOT_TENANT_DATA, "a /ui route was added or removed: give it a case"


@pytest.fixture
async def intruder(api: httpx.AsyncClient) -> AsyncIterator[httpx.AsyncClient]:
    client = await ui_sign_in(str(api.base_url), (await create_tenant(api, "bravo"))["api_key"])
    yield client
    await client.aclose()


async def _send(client: httpx.AsyncClient, method: str, request: Request) -> httpx.Response:
    url, form = request
    if method == "GET":
        return await client.get(url)
    csrf = csrf_of((await client.get("/ui")).text)
    return await client.post(url, data={**(form or {}), "csrf_token": csrf})


@pytest.mark.parametrize(("method", "path"), sorted(CASES))
async def test_another_tenants_session_gets_404_and_changes_nothing(
    api: httpx.AsyncClient,
    alpha: Victim,
    intruder: httpx.AsyncClient,
    pool: asyncpg.Pool,
    method: str,
    path: str,
) -> None:
    before = await snapshot(pool)
    r = await _send(intruder, method, CASES[(method, path)](alpha))
    if path == "/ui":
        assert r.status_code == 200
        assert alpha.run_id not in r.text and "alpha" not in r.text
    else:
        assert r.status_code == 404, r.text
        assert "owned" not in r.text and "pending" not in r.text  # nothing of the run or the job shows
    assert await snapshot(pool) == before


@pytest.mark.parametrize(("method", "path"), sorted(CASES))
async def test_no_session_is_sent_to_sign_in(
    api: httpx.AsyncClient, alpha: Victim, pool: asyncpg.Pool, method: str, path: str
) -> None:
    url, form = CASES[(method, path)](alpha)
    before = await snapshot(pool)
    r = await api.request(method, url, data=form if method == "POST" else None)
    assert r.status_code == 303 and r.headers["location"] == "/ui/login", r.text
    htmx = await api.request(method, url, headers={"HX-Request": "true"})
    assert htmx.status_code == 204 and htmx.headers["HX-Redirect"] == "/ui/login"
    assert await snapshot(pool) == before
