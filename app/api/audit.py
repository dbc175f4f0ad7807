"""The audit log: a tenant's changes, newest first."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import Path, Query

from app.api.cursors import decode_cursor, encode_cursor
from app.api.deps import PrincipalDep, StateDep
from app.api.routers import api_router
from app.api.schemas.audit import AuditAction, AuditEvent, AuditEventList
from app.api.schemas.common import TENANT_ID_PATTERN, error_responses
from app.services import audit as audit_service

router = api_router(tags=["audit"])
TenantIdPath = Annotated[str, Path(pattern=TENANT_ID_PATTERN)]


@router.get(
    "/tenants/{tenant_id}/audit", response_model=AuditEventList, responses=error_responses(401, 403, 404, 422)
)
async def list_audit_events(
    tenant_id: TenantIdPath,
    state: StateDep,
    principal: PrincipalDep,
    action: Annotated[AuditAction | None, Query(description="Only events of this action.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    cursor: Annotated[str | None, Query(max_length=256)] = None,
) -> AuditEventList:
    """Every change made to the tenant through the API or the dashboard (runs submitted by clients
    are not changes here), newest first, keyset-paginated: pass next_cursor back as cursor. Kept
    SCHEDULER_AUDIT_RETENTION_DAYS days. The tenant's key or the admin token."""
    principal.require_tenant(tenant_id)
    events = await audit_service.list_events(
        state.pool, tenant_id, action=action, after=decode_cursor(cursor) if cursor else None, limit=limit
    )
    last = events[-1] if len(events) == limit else None
    return AuditEventList(
        events=[AuditEvent.model_validate(asdict(e)) for e in events],
        next_cursor=encode_cursor(last.at, last.id) if last else None,
    )
