"""Tenants: the admin creates them, ids are checked, keys rotate without breaking the old ones and
stop working once revoked."""

from __future__ import annotations

import asyncpg
import httpx
import pytest

from tests.support import assert_error, bearer, count_rows, create_tenant, snapshot


async def test_admin_creates_a_tenant_whose_key_works(
    api: httpx.AsyncClient, admin: dict, pool: asyncpg.Pool
) -> None:
    r = await api.post("/tenants", json={"id": "acme"}, headers=admin)
    assert r.status_code == 201, r.text
    created = r.json()
    assert set(created) == {"id", "key_id", "api_key", "signing_secret"}
    assert created["api_key"].startswith(f"sch_{created['key_id']}_")
    assert created["id"] == "acme"
    assert created["api_key"].startswith("sch_") and created["signing_secret"].startswith("whsec_")
    assert (await api.get("/tenants/acme/jobs", headers=bearer(created["api_key"]))).status_code == 200
    # Stored hashed, shown once: the plaintext key is nowhere in the database.
    rows = await pool.fetch("SELECT salt, hash FROM api_keys WHERE tenant_id = 'acme'")
    assert len(rows) == 1
    assert created["api_key"].encode() not in rows[0]["hash"]


async def test_longest_allowed_id_is_accepted(api: httpx.AsyncClient, admin: dict) -> None:
    tenant_id = "a" + "b_-9" * 15 + "xy"  # 63 characters, the pattern's maximum
    assert len(tenant_id) == 63
    r = await api.post("/tenants", json={"id": tenant_id}, headers=admin)
    assert r.status_code == 201, r.text


async def test_duplicate_tenant_is_409_and_writes_nothing(
    api: httpx.AsyncClient, admin: dict, pool: asyncpg.Pool
) -> None:
    await create_tenant(api, "acme")
    before = await snapshot(pool)
    r = await api.post("/tenants", json={"id": "acme"}, headers=admin)
    assert_error(r, 409, "conflict", field="id")
    assert await snapshot(pool) == before  # in particular, no second key was issued


@pytest.mark.parametrize(
    "body",
    [
        {"id": "Acme"},  # uppercase
        {"id": "a" * 64},  # too long
        {"id": ""},  # empty
        {"id": "-acme"},  # must start with a letter or digit
        {"id": "ac me"},
        {"id": "acme\n"},
        {"id": 42},
        {},
    ],
    ids=["uppercase", "too-long", "empty", "leading-dash", "space", "newline", "not-a-string", "missing"],
)
async def test_bad_tenant_id_is_422_naming_id(
    api: httpx.AsyncClient, admin: dict, pool: asyncpg.Pool, body: dict
) -> None:
    r = await api.post("/tenants", json=body, headers=admin)
    assert_error(r, 422, "invalid_input", field="id")
    assert await count_rows(pool, "tenants") == 0


async def test_tenant_key_cannot_create_tenants(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    before = await snapshot(pool)
    r = await api.post("/tenants", json={"id": "mallory"}, headers=tenant["auth"])
    # 404, not 403: a tenant key learns nothing about the admin surface.
    assert_error(r, 404, "not_found")
    assert await snapshot(pool) == before


async def test_key_rotation_keeps_old_keys_working(api: httpx.AsyncClient, tenant: dict, admin: dict) -> None:
    old = tenant["auth"]
    r = await api.post("/tenants/acme/keys", headers=old)
    assert r.status_code == 201, r.text
    assert set(r.json()) == {"key_id", "api_key", "scopes"}
    assert r.json()["scopes"] == ["runs:read", "runs:write", "jobs:read", "jobs:write", "tenant:admin"]
    new = bearer(r.json()["api_key"])
    assert new != old
    by_admin = await api.post("/tenants/acme/keys", headers=admin)
    assert by_admin.status_code == 201, by_admin.text
    for auth in (old, new, bearer(by_admin.json()["api_key"])):
        r = await api.get("/tenants/acme/jobs/hello", headers=auth)
        assert r.status_code == 200, r.text


async def test_rotating_a_key_of_an_unknown_tenant_is_404(
    api: httpx.AsyncClient, admin: dict, pool: asyncpg.Pool
) -> None:
    r = await api.post("/tenants/nobody/keys", headers=admin)
    assert_error(r, 404, "not_found", field="tenant_id")
    assert await count_rows(pool, "api_keys") == 0


async def test_a_revoked_key_stops_working_and_the_others_do_not(
    api: httpx.AsyncClient, tenant: dict, admin: dict, pool: asyncpg.Pool
) -> None:
    old = tenant["auth"]
    rotated = (await api.post("/tenants/acme/keys", headers=old)).json()
    new = bearer(rotated["api_key"])
    listed = (await api.get("/tenants/acme/keys", headers=new)).json()["keys"]
    old_id = old["Authorization"].removeprefix("Bearer sch_").split("_", 1)[0]
    assert [k["key_id"] for k in listed] == [old_id, rotated["key_id"]]
    assert all(k["revoked_at"] is None for k in listed)
    assert "sch_" not in str(listed)  # ids, never secrets

    r = await api.delete(f"/tenants/acme/keys/{old_id}", headers=new)
    assert r.status_code == 204, r.text
    assert_error(await api.get("/tenants/acme/jobs", headers=old), 401, "unauthorized")
    assert (await api.get("/tenants/acme/jobs", headers=new)).status_code == 200
    listed = (await api.get("/tenants/acme/keys", headers=new)).json()["keys"]
    assert [k["revoked_at"] is not None for k in listed] == [True, False]
    revoked_at = await pool.fetchval("SELECT revoked_at FROM api_keys WHERE revoked_at IS NOT NULL")
    # Revoking again changes nothing; so does the admin revoking it.
    assert (await api.delete(f"/tenants/acme/keys/{old_id}", headers=admin)).status_code == 204
    assert await pool.fetchval("SELECT revoked_at FROM api_keys WHERE revoked_at IS NOT NULL") == revoked_at
    # A key can revoke itself: the caller is then locked out until the admin issues another.
    assert (await api.delete(f"/tenants/acme/keys/{rotated['key_id']}", headers=new)).status_code == 204
    assert_error(await api.get("/tenants/acme/jobs", headers=new), 401, "unauthorized")
    assert (await api.post("/tenants/acme/keys", headers=admin)).status_code == 201


async def test_revoking_an_unknown_key_is_404_naming_it(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    before = await snapshot(pool)
    r = await api.delete(f"/tenants/acme/keys/{'0' * 32}", headers=tenant["auth"])
    assert_error(r, 404, "not_found", field="key_id")
    r = await api.delete("/tenants/acme/keys/not-a-key-id", headers=tenant["auth"])
    assert_error(r, 422, "invalid_input", field="key_id")
    assert await snapshot(pool) == before
