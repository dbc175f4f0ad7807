"""Scoped keys: every route allows a key holding its scope and refuses (403, nothing written) one that
does not; another tenant's resource stays 404 whatever the key's scopes; a key is issued with the
scopes asked for (all by default), never more than its issuer holds, and keys made before scopes
existed keep every one.

The routes and their requests are test_api_auth's CASES (taken from the app itself), their scopes
app.api.scopes' table."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid

import asyncpg
import httpx
import pytest

from app.api.scopes import ADMIN, ROUTE_SCOPES
from app.services.auth import SCOPES, KeyCache, authenticate
from tests.integration.test_api_auth import CASES, ROUTES, Victim, _send, victim
from tests.integration.test_migrations import alembic
from tests.support import ADMIN_TOKEN, assert_error, bearer, create_tenant, snapshot

__all__ = ["victim"]  # the fixture, shared with test_api_auth

SCOPED = [(m, p) for m, p in ROUTES if ROUTE_SCOPES[(m, p)] != ADMIN]
ADMIN_AUTH = bearer(ADMIN_TOKEN)


async def _key(api: httpx.AsyncClient, tenant: str, scopes: list[str] | None) -> dict[str, str]:
    body = {"scopes": scopes} if scopes is not None else None
    r = await api.post(f"/tenants/{tenant}/keys", json=body, headers=ADMIN_AUTH)
    assert r.status_code == 201, r.text
    assert r.json()["scopes"] == (scopes if scopes is not None else list(SCOPES))
    return bearer(r.json()["api_key"])


def _request(method: str, path: str, v: Victim, scope: str) -> tuple[str, dict | None]:
    url, body = CASES[(method, path)](v)
    if (method, path) == ("POST", "/tenants/{tenant_id}/keys"):
        body = {"scopes": [scope]}  # a key issues only scopes it holds itself
    return url, body


def test_every_route_of_the_auth_cases_has_a_scope() -> None:
    assert all(route in ROUTE_SCOPES for route in ROUTES)


@pytest.mark.parametrize(("method", "path"), SCOPED)
async def test_a_key_without_the_routes_scope_gets_403_and_changes_nothing(
    api: httpx.AsyncClient, victim: Victim, pool: asyncpg.Pool, method: str, path: str
) -> None:
    scope = ROUTE_SCOPES[(method, path)]
    others = [s for s in SCOPES if s != scope]
    lacking = await _key(api, victim.tenant, others)
    request = _request(method, path, victim, scope)
    before = await snapshot(pool)

    r = await _send(api, method, request, lacking)
    body = assert_error(r, 403, "forbidden", field="Authorization")
    assert body["detail"] == f"this API key lacks the scope {scope}"
    assert await snapshot(pool) == before

    # A key holding that scope alone is enough.
    r = await _send(api, method, request, await _key(api, victim.tenant, [scope]))
    assert 200 <= r.status_code < 300, r.text


@pytest.mark.parametrize(("method", "path"), SCOPED)
async def test_another_tenants_key_gets_404_whatever_its_scopes(
    api: httpx.AsyncClient, victim: Victim, pool: asyncpg.Pool, method: str, path: str
) -> None:
    await create_tenant(api, "bravo")
    scope = ROUTE_SCOPES[(method, path)]
    request = _request(method, path, victim, scope)
    keys = [await _key(api, "bravo", scopes) for scopes in ([s for s in SCOPES if s != scope], [scope])]
    before = await snapshot(pool)
    for key in keys:
        r = await _send(api, method, request, key)
        assert_error(r, 404, "not_found")
    assert await snapshot(pool) == before


async def test_a_run_of_another_tenant_is_404_and_a_missing_one_too(
    api: httpx.AsyncClient, victim: Victim
) -> None:
    """A run id names no tenant: a key without the scope learns the run is not its own (404) before
    it learns what it lacks (403), as for a tenant in the path."""
    read_only = await _key(api, victim.tenant, ["runs:read"])
    assert_error(await api.post(f"/runs/{victim.run_id}/cancel", headers=read_only), 403, "forbidden")
    await create_tenant(api, "bravo")
    foreign = await _key(api, "bravo", ["runs:read"])
    assert_error(await api.post(f"/runs/{victim.run_id}/cancel", headers=foreign), 404, "not_found")
    missing = "0190a8b0-0000-7000-8000-000000000000"
    assert_error(await api.post(f"/runs/{missing}/cancel", headers=read_only), 404, "not_found")
    assert_error(await api.post("/runs/not-an-id/cancel", headers=read_only), 403, "forbidden")


async def test_keys_list_their_scopes_and_default_to_all(api: httpx.AsyncClient, victim: Victim) -> None:
    await _key(api, victim.tenant, None)
    await _key(api, victim.tenant, ["runs:read", "jobs:read"])
    r = await api.post(
        f"/tenants/{victim.tenant}/keys", json={"scopes": ["jobs:read", "jobs:read"]}, headers=ADMIN_AUTH
    )
    assert r.json()["scopes"] == ["jobs:read"]  # a repeated scope counts once
    listed = (await api.get(f"/tenants/{victim.tenant}/keys", headers=victim.auth)).json()["keys"]
    assert [k["scopes"] for k in listed] == [
        list(SCOPES),
        list(SCOPES),
        ["runs:read", "jobs:read"],
        ["jobs:read"],
    ]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scopes": []}, "scopes"),
        ({"scopes": ["runs:read", "runs:delete"]}, "scopes[1]"),
        ({"scopes": ["RUNS:READ"]}, "scopes[0]"),
        ({"scopes": "runs:read"}, "scopes"),
        ({"scopes": [None]}, "scopes[0]"),
        ({"scopes": ["runs:read"] * 17}, "scopes"),
        ({"scope": ["runs:read"]}, "scope"),
    ],
)
async def test_bad_scopes_are_422_naming_the_field_and_write_nothing(
    api: httpx.AsyncClient, victim: Victim, pool: asyncpg.Pool, body: dict, field: str
) -> None:
    before = await snapshot(pool)
    r = await api.post(f"/tenants/{victim.tenant}/keys", json=body, headers=victim.auth)
    assert_error(r, 422, "invalid_input", field=field)
    assert await snapshot(pool) == before


async def test_a_key_issues_only_scopes_it_holds(
    api: httpx.AsyncClient, victim: Victim, pool: asyncpg.Pool
) -> None:
    key_admin = await _key(api, victim.tenant, ["tenant:admin", "runs:read"])
    before = await snapshot(pool)
    for body in (None, {"scopes": ["tenant:admin", "runs:write"]}):
        r = await api.post(f"/tenants/{victim.tenant}/keys", json=body, headers=key_admin)
        assert_error(r, 403, "forbidden")
        assert "runs:write" in r.json()["detail"] or "jobs:read" in r.json()["detail"]
    assert await snapshot(pool) == before
    r = await api.post(f"/tenants/{victim.tenant}/keys", json={"scopes": ["runs:read"]}, headers=key_admin)
    assert r.status_code == 201 and r.json()["scopes"] == ["runs:read"], r.text


async def test_the_admin_token_keeps_full_access(api: httpx.AsyncClient, victim: Victim) -> None:
    for url in (f"/tenants/{victim.tenant}/keys", f"/tenants/{victim.tenant}/runs", f"/runs/{victim.run_id}"):
        assert (await api.get(url, headers=ADMIN_AUTH)).status_code == 200


async def test_keys_made_before_the_migration_keep_every_scope(fresh_database: str) -> None:
    """A key row written at revision 0022 (no scopes column) holds every scope after the upgrade."""
    url = fresh_database
    await alembic(url, "upgrade", "0022")
    key_id, salt, secret = uuid.uuid4(), secrets.token_bytes(16), secrets.token_urlsafe(32)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("INSERT INTO tenants (id, signing_secret) VALUES ('old', 'whsec_x')")
        await conn.execute(
            "INSERT INTO api_keys (id, tenant_id, salt, hash) VALUES ($1, 'old', $2, $3)",
            key_id,
            salt,
            hmac.new(salt, secret.encode(), hashlib.sha256).digest(),
        )
    finally:
        await conn.close()
    await alembic(url, "upgrade", "head")
    pool = await asyncpg.create_pool(url, min_size=1, max_size=2)
    try:
        principal = await authenticate(pool, KeyCache(), f"sch_{key_id.hex}_{secret}", None)
    finally:
        await pool.close()
    assert principal.tenant_id == "old" and principal.scopes == frozenset(SCOPES)
