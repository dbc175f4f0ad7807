"""Tenants (admin), API keys (rotate, list, revoke) and webhook signing secrets (rotate)."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response

from app.api.deps import PrincipalDep, StateDep
from app.api.schemas import (
    ApiKey,
    ApiKeyList,
    KeyCreated,
    SigningSecretCreated,
    SigningSecretRotation,
    TenantCreate,
    TenantCreated,
    error_responses,
)
from app.db import tenants as tenant_repo
from app.errors import Conflict, NotFound
from app.services.auth import issue_key
from app.services.signing import new_signing_secret

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
        key_id, key = await issue_key(conn, body.id)
    return TenantCreated(id=body.id, key_id=key_id, api_key=key, signing_secret=secret)


@router.post(
    "/tenants/{tenant_id}/keys",
    status_code=201,
    response_model=KeyCreated,
    responses=ERRORS,
    name="create_key",
)
async def rotate_key(tenant_id: str, state: StateDep, principal: PrincipalDep) -> KeyCreated:
    """Issue another key for the tenant. Earlier keys keep working until revoked."""
    principal.require_tenant(tenant_id)
    async with state.pool.acquire() as conn, conn.transaction():
        if not await tenant_repo.tenant_exists(conn, tenant_id):
            raise NotFound(f"tenant {tenant_id!r} not found", field="tenant_id")
        key_id, key = await issue_key(conn, tenant_id)
    return KeyCreated(key_id=key_id, api_key=key)


@router.get("/tenants/{tenant_id}/keys", response_model=ApiKeyList, responses=ERRORS)
async def list_keys(tenant_id: str, state: StateDep, principal: PrincipalDep) -> ApiKeyList:
    """The tenant's keys, oldest first, revoked ones included (never their secrets)."""
    principal.require_tenant(tenant_id)
    async with state.pool.acquire() as conn:
        if not await tenant_repo.tenant_exists(conn, tenant_id):
            raise NotFound(f"tenant {tenant_id!r} not found", field="tenant_id")
        rows = await tenant_repo.list_api_keys(conn, tenant_id)
    return ApiKeyList(
        keys=[
            ApiKey(key_id=r["id"].hex, created_at=r["created_at"], revoked_at=r["revoked_at"]) for r in rows
        ]
    )


@router.delete("/tenants/{tenant_id}/keys/{key_id}", status_code=204, responses=ERRORS)
async def revoke_key(tenant_id: str, key_id: uuid.UUID, state: StateDep, principal: PrincipalDep) -> Response:
    """Revoke a key, the one making the request included. It stops working on this API process at
    once and on every other within seconds (their key caches' TTL). Revoking again is a no-op."""
    principal.require_tenant(tenant_id)
    async with state.pool.acquire() as conn:
        if not await tenant_repo.revoke_api_key(conn, tenant_id, key_id):
            raise NotFound(f"key {key_id.hex} not found", field="key_id")
    state.keys.forget(key_id)
    return Response(status_code=204)


@router.post(
    "/tenants/{tenant_id}/signing-secrets",
    status_code=201,
    response_model=SigningSecretCreated,
    responses=ERRORS,
)
async def rotate_signing_secret(
    tenant_id: str, state: StateDep, principal: PrincipalDep, body: SigningSecretRotation | None = None
) -> SigningSecretCreated:
    """A new webhook signing secret. Until `previous_expires_at` every webhook is signed under both
    (two signatures in `webhook-signature`), so receivers can switch at their pace; then the old one
    is dropped. Workers pick the new secret up within SCHEDULER_SIGNING_SECRET_CACHE_SECONDS.
    Rotating again within an overlap retires the oldest secret at once."""
    principal.require_tenant(tenant_id)
    overlap = body.overlap_seconds if body is not None else None
    if overlap is None:
        overlap = state.settings.signing_secret_overlap_seconds
    secret = new_signing_secret()
    async with state.pool.acquire() as conn:
        expires_at = await tenant_repo.rotate_signing_secret(conn, tenant_id, secret, overlap)
    if expires_at is None:
        raise NotFound(f"tenant {tenant_id!r} not found", field="tenant_id")
    return SigningSecretCreated(signing_secret=secret, previous_expires_at=expires_at)
