"""Tenants (admin), API keys (rotate, list, revoke) and webhook signing secrets (rotate)."""

from __future__ import annotations

import uuid
from dataclasses import asdict

from fastapi import Response

from app.api.deps import AuditDep, PrincipalDep, StateDep
from app.api.routers import api_router
from app.api.schemas.common import error_responses
from app.api.schemas.tenants import (
    ApiKey,
    ApiKeyList,
    KeyCreate,
    KeyCreated,
    SigningSecretCreated,
    SigningSecretRotation,
    Tenant,
    TenantCreate,
    TenantCreated,
    TenantPatch,
)
from app.services import flow as flow_service
from app.services import tenants as tenant_service
from app.services.auth import SCOPES
from app.services.flow import TenantLimits

router = api_router(tags=["tenants"])
ERRORS = error_responses(401, 404, 409, 422)
SCOPED_ERRORS = error_responses(401, 403, 404, 409, 422)  # the routes a key's scope may refuse


@router.post("/tenants", status_code=201, response_model=TenantCreated, responses=ERRORS)
async def create_tenant(
    body: TenantCreate, state: StateDep, principal: PrincipalDep, audit: AuditDep
) -> TenantCreated:
    """Create a tenant (admin token only). The API key and signing secret are shown once."""
    principal.require_admin()
    new = await tenant_service.create_tenant(state.pool, body.id, audit=audit)
    return TenantCreated(id=new.id, key_id=new.key_id, api_key=new.api_key, signing_secret=new.signing_secret)


def _tenant_out(t: TenantLimits) -> Tenant:
    return Tenant(**asdict(t))


@router.get("/tenants/{tenant_id}", response_model=Tenant, responses=ERRORS)
async def get_tenant(tenant_id: str, state: StateDep, principal: PrincipalDep) -> Tenant:
    """The tenant's flow control (admin token only): paused, max_in_flight and its runs in flight."""
    principal.require_admin()
    return _tenant_out(await flow_service.get_tenant(state.pool, tenant_id))


@router.patch("/tenants/{tenant_id}", response_model=Tenant, responses=ERRORS)
async def patch_tenant(
    tenant_id: str, body: TenantPatch, state: StateDep, principal: PrincipalDep, audit: AuditDep
) -> Tenant:
    """Set the tenant's max_in_flight (admin token only); null removes it. Set on a tenant without
    one, its pending runs wait for a slot and its dispatched and running runs count. Lowered below
    the runs in flight, none is stopped: new ones wait until enough end. Removed, its waiting runs
    are released in their order (within seconds: the engines' flow keeper)."""
    principal.require_admin()
    limits = await flow_service.set_tenant_max_in_flight(
        state.pool, tenant_id, body.max_in_flight, audit=audit
    )
    return _tenant_out(limits)


@router.post(
    "/tenants/{tenant_id}/keys",
    status_code=201,
    response_model=KeyCreated,
    responses=SCOPED_ERRORS,
    name="create_key",
)
async def rotate_key(
    tenant_id: str, state: StateDep, principal: PrincipalDep, audit: AuditDep, body: KeyCreate | None = None
) -> KeyCreated:
    """Issue another key for the tenant, with `scopes` (default: every scope). Earlier keys keep
    working until revoked. A key issues only scopes it holds itself: asking for another is 403."""
    principal.require_tenant(tenant_id)
    scopes = tuple(body.scopes) if body is not None else SCOPES
    for scope in scopes:
        principal.require_scope(scope)
    key_id, key = await tenant_service.issue_api_key(state.pool, tenant_id, scopes, audit=audit)
    return KeyCreated(key_id=key_id, api_key=key, scopes=list(scopes))


@router.get("/tenants/{tenant_id}/keys", response_model=ApiKeyList, responses=SCOPED_ERRORS)
async def list_keys(tenant_id: str, state: StateDep, principal: PrincipalDep) -> ApiKeyList:
    """The tenant's keys with their scopes, oldest first, revoked ones included (never their secrets)."""
    principal.require_tenant(tenant_id)
    keys = await tenant_service.list_api_keys(state.pool, tenant_id)
    return ApiKeyList(
        keys=[
            ApiKey(key_id=k.key_id, created_at=k.created_at, revoked_at=k.revoked_at, scopes=list(k.scopes))  # type: ignore[arg-type]
            for k in keys
        ]
    )


@router.delete("/tenants/{tenant_id}/keys/{key_id}", status_code=204, responses=SCOPED_ERRORS)
async def revoke_key(
    tenant_id: str, key_id: uuid.UUID, state: StateDep, principal: PrincipalDep, audit: AuditDep
) -> Response:
    """Revoke a key, the one making the request included. It stops working on this API process at
    once and on every other within seconds (their key caches' TTL). Revoking again is a no-op."""
    principal.require_tenant(tenant_id)
    await tenant_service.revoke_api_key(state.pool, state.keys, tenant_id, key_id, audit=audit)
    return Response(status_code=204)


@router.post(
    "/tenants/{tenant_id}/signing-secrets",
    status_code=201,
    response_model=SigningSecretCreated,
    responses=SCOPED_ERRORS,
)
async def rotate_signing_secret(
    tenant_id: str,
    state: StateDep,
    principal: PrincipalDep,
    audit: AuditDep,
    body: SigningSecretRotation | None = None,
) -> SigningSecretCreated:
    """A new webhook signing secret. Until `previous_expires_at` every webhook is signed under both
    (two signatures in `webhook-signature`), so receivers can switch at their pace; then the old one
    is dropped. Workers pick the new secret up within SCHEDULER_SIGNING_SECRET_CACHE_SECONDS.
    Rotating again within an overlap retires the oldest secret at once."""
    principal.require_tenant(tenant_id)
    overlap = body.overlap_seconds if body is not None else None
    if overlap is None:
        overlap = state.settings.signing_secret_overlap_seconds
    secret, expires_at = await tenant_service.rotate_signing_secret(
        state.pool, tenant_id, overlap, audit=audit
    )
    return SigningSecretCreated(signing_secret=secret, previous_expires_at=expires_at)
