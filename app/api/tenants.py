"""Tenants (admin) and API key rotation."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import PrincipalDep, StateDep
from app.api.schemas import KeyCreated, TenantCreate, TenantCreated, error_responses
from app.db import tenants as tenant_repo
from app.errors import Conflict, NotFound
from app.services.auth import issue_key, new_signing_secret

router = APIRouter(tags=["tenants"])
ERRORS = error_responses(401, 404, 409, 422)


@router.post("/tenants", status_code=201, response_model=TenantCreated, responses=ERRORS)
async def create_tenant(body: TenantCreate, state: StateDep, principal: PrincipalDep) -> TenantCreated:
    """Create a tenant (admin token only). The API key and signing secret are shown once."""
    principal.require_admin()
    secret = new_signing_secret()
    async with state.pool.acquire() as conn, conn.transaction():
        if not await tenant_repo.create_tenant(conn, body.id, secret):
            raise Conflict(f"tenant {body.id!r} already exists", field="id")
        key = await issue_key(conn, body.id)
    return TenantCreated(id=body.id, api_key=key, signing_secret=secret)


@router.post("/tenants/{tenant_id}/keys", status_code=201, response_model=KeyCreated, responses=ERRORS)
async def rotate_key(tenant_id: str, state: StateDep, principal: PrincipalDep) -> KeyCreated:
    """Issue another key for the tenant. Earlier keys keep working until revoked."""
    principal.require_tenant(tenant_id)
    async with state.pool.acquire() as conn, conn.transaction():
        if not await tenant_repo.tenant_exists(conn, tenant_id):
            raise NotFound(f"tenant {tenant_id!r} not found", field="tenant_id")
        key = await issue_key(conn, tenant_id)
    return KeyCreated(api_key=key)
