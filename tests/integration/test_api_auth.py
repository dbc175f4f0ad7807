"""Auth over every route: bad credentials are 401; another tenant's key is 404 and changes nothing.

The routes come from the app itself, so a route added without a case here fails these tests."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest
from fastapi.routing import iter_route_contexts

from app.config import Settings
from app.main import create_app
from tests.support import ADMIN_TOKEN, assert_error, bearer, create_tenant, put_job, snapshot, submit_run

NOT_API = {"/metrics", "/healthz", "/readyz", "/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc"}
# iter_route_contexts flattens included routers (app.routes holds the routers, not their routes).
ROUTES = sorted(
    (method, route.path)
    for route in iter_route_contexts(create_app(Settings()).routes)
    # The dashboard's routes have their own table: tests/integration/test_ui_isolation.py.
    if route.path not in NOT_API and not route.path.startswith("/ui")
    for method in (route.methods or set()) - {"HEAD"}
)


def _ago(**delta: float) -> str:
    return (datetime.now(UTC) - timedelta(**delta)).isoformat()


@dataclass(frozen=True)
class Victim:
    """Tenant `alpha` with a job, a pending run and a cancelled one, as another tenant would try to
    reach them."""

    tenant: str
    job: str
    run_id: str
    cancelled_run_id: str
    key_id: str
    auth: dict[str, str]
    group_id: str = ""  # an open group of one run, an hour ahead


Request = tuple[str, dict | None]  # (url, json body)
CASES: dict[tuple[str, str], Callable[[Victim], Request]] = {
    ("POST", "/tenants"): lambda v: ("/tenants", {"id": "mallory"}),
    ("GET", "/tenants/{tenant_id}"): lambda v: (f"/tenants/{v.tenant}", None),
    ("PATCH", "/tenants/{tenant_id}"): lambda v: (f"/tenants/{v.tenant}", {"max_in_flight": 1}),
    ("POST", "/tenants/{tenant_id}/keys"): lambda v: (f"/tenants/{v.tenant}/keys", None),
    ("GET", "/tenants/{tenant_id}/keys"): lambda v: (f"/tenants/{v.tenant}/keys", None),
    ("DELETE", "/tenants/{tenant_id}/keys/{key_id}"): lambda v: (
        f"/tenants/{v.tenant}/keys/{v.key_id}",
        None,
    ),
    ("POST", "/tenants/{tenant_id}/signing-secrets"): lambda v: (
        f"/tenants/{v.tenant}/signing-secrets",
        None,
    ),
    ("GET", "/tenants/{tenant_id}/jobs"): lambda v: (f"/tenants/{v.tenant}/jobs", None),
    ("PUT", "/tenants/{tenant_id}/jobs/{name}"): lambda v: (
        f"/tenants/{v.tenant}/jobs/{v.job}",
        {"target": {"type": "noop"}, "payload": {"owned": "by bravo"}},
    ),
    ("GET", "/tenants/{tenant_id}/jobs/{name}"): lambda v: (f"/tenants/{v.tenant}/jobs/{v.job}", None),
    ("DELETE", "/tenants/{tenant_id}/jobs/{name}"): lambda v: (f"/tenants/{v.tenant}/jobs/{v.job}", None),
    ("POST", "/tenants/{tenant_id}/runs"): lambda v: (f"/tenants/{v.tenant}/runs", {"job": v.job}),
    ("POST", "/tenants/{tenant_id}/runs/batch"): lambda v: (
        f"/tenants/{v.tenant}/runs/batch",
        {"runs": [{"job": v.job}, {"job": v.job}]},
    ),
    ("GET", "/tenants/{tenant_id}/runs"): lambda v: (f"/tenants/{v.tenant}/runs", None),
    ("GET", "/runs/{run_id}"): lambda v: (f"/runs/{v.run_id}", None),
    ("POST", "/runs/{run_id}/cancel"): lambda v: (f"/runs/{v.run_id}/cancel", None),
    ("POST", "/tenants/{tenant_id}/jobs/{name}/pause"): lambda v: (
        f"/tenants/{v.tenant}/jobs/{v.job}/pause",
        None,
    ),
    ("POST", "/tenants/{tenant_id}/jobs/{name}/resume"): lambda v: (
        f"/tenants/{v.tenant}/jobs/{v.job}/resume",
        None,
    ),
    ("POST", "/tenants/{tenant_id}/pause"): lambda v: (f"/tenants/{v.tenant}/pause", None),
    ("POST", "/tenants/{tenant_id}/resume"): lambda v: (f"/tenants/{v.tenant}/resume", None),
    ("POST", "/runs/{run_id}/retry"): lambda v: (f"/runs/{v.cancelled_run_id}/retry", None),
    ("POST", "/runs/{run_id}/reschedule"): lambda v: (
        f"/runs/{v.run_id}/reschedule",
        {"due_at": "2020-01-01T00:00:00Z"},
    ),
    # A yearly schedule has no occurrence in the last hour: the owner's backfill makes none, and says so.
    ("POST", "/tenants/{tenant_id}/jobs/{name}/backfill"): lambda v: (
        f"/tenants/{v.tenant}/jobs/yearly/backfill",
        {"from": _ago(hours=2), "to": _ago(hours=1)},
    ),
    ("GET", "/tenants/{tenant_id}/groups"): lambda v: (f"/tenants/{v.tenant}/groups", None),
    ("GET", "/tenants/{tenant_id}/groups/{group_id}"): lambda v: (
        f"/tenants/{v.tenant}/groups/{v.group_id}",
        None,
    ),
    ("POST", "/tenants/{tenant_id}/events/{name}"): lambda v: (
        f"/tenants/{v.tenant}/events/order.placed",
        {},
    ),
    ("POST", "/tenants/{tenant_id}/runs/actions"): lambda v: (
        f"/tenants/{v.tenant}/runs/actions",
        {"action": "cancel", "filter": {"ids": [v.run_id, v.cancelled_run_id]}},
    ),
    ("GET", "/tenants/{tenant_id}/audit"): lambda v: (f"/tenants/{v.tenant}/audit", None),
}
# Routes only the admin token may use: their owner, for the last step below, is the admin.
ADMIN_ONLY = {"/tenants", "/tenants/{tenant_id}", "/tenants/{tenant_id}/pause", "/tenants/{tenant_id}/resume"}


def test_every_route_has_a_case() -> None:
    assert set(ROUTES) == set(CASES), "a route was added or removed: give it a case in CASES"


@pytest.fixture
async def victim(api: httpx.AsyncClient) -> Victim:
    created = await create_tenant(api, "alpha")
    auth = bearer(created["api_key"])
    await put_job(api, "alpha", "hello", auth, payload={"owned": "by alpha"})
    await put_job(api, "alpha", "yearly", auth, schedule="0 0 1 1 *")
    run = await submit_run(api, "alpha", auth, job="hello")
    cancelled = await submit_run(api, "alpha", auth, job="hello")
    assert (await api.post(f"/runs/{cancelled['id']}/cancel", headers=auth)).status_code == 200
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    grouped = await api.post(
        "/tenants/alpha/runs/batch",
        json={"runs": [{"job": "hello", "scheduled_at": later}], "group": {"name": "alpha-group"}},
        headers=auth,
    )
    assert grouped.status_code == 201, grouped.text
    return Victim(
        "alpha",
        "hello",
        str(run["id"]),
        str(cancelled["id"]),
        created["key_id"],
        auth,
        grouped.json()["group_id"],
    )


async def _send(
    api: httpx.AsyncClient, method: str, request: Request, auth: dict[str, str]
) -> httpx.Response:
    url, body = request
    return await api.request(method, url, json=body, headers=auth)


@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_bad_credentials_are_401(
    api: httpx.AsyncClient, victim: Victim, pool: asyncpg.Pool, method: str, path: str
) -> None:
    key_id = victim.auth["Authorization"].removeprefix("Bearer sch_").split("_", 1)[0]
    variants = {
        "no header": {},
        "bearer without a token": {"Authorization": "Bearer"},
        "wrong scheme": {"Authorization": f"Basic {ADMIN_TOKEN}"},
        "no scheme": {"Authorization": ADMIN_TOKEN},
        "garbage token": bearer("garbage"),
        "unknown key id": bearer(f"sch_{uuid.uuid4().hex}_{'x' * 43}"),
        "real key id, wrong secret": bearer(f"sch_{key_id}_{'x' * 43}"),
        "admin token with a suffix": bearer(ADMIN_TOKEN + "x"),
    }
    request = CASES[(method, path)](victim)
    before = await snapshot(pool)
    for name, headers in variants.items():
        r = await _send(api, method, request, headers)
        assert r.status_code == 401, f"{name}: {r.status_code} {r.text}"
        assert_error(r, 401, "unauthorized")
    assert await snapshot(pool) == before


@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_another_tenants_key_gets_404_and_changes_nothing(
    api: httpx.AsyncClient, victim: Victim, pool: asyncpg.Pool, method: str, path: str
) -> None:
    intruder = bearer((await create_tenant(api, "bravo"))["api_key"])
    request = CASES[(method, path)](victim)
    before = await snapshot(pool)

    r = await _send(api, method, request, intruder)
    assert_error(r, 404, "not_found")
    assert "alpha" not in r.text or path.startswith("/tenants/{tenant_id}"), r.text  # no leak of the owner
    assert await snapshot(pool) == before
    run = await api.get(f"/runs/{victim.run_id}", headers=victim.auth)
    assert run.json()["status"] == "pending"

    # The very same request from the owner succeeds: the 404 was about ownership, not the request.
    owner = bearer(ADMIN_TOKEN) if path in ADMIN_ONLY else victim.auth
    r = await _send(api, method, request, owner)
    assert 200 <= r.status_code < 300, r.text
