"""The Audit page: the tenant's audit log (GET /tenants/{id}/audit's events), newest first."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request, Response

from app.api.cursors import decode_cursor, encode_cursor
from app.api.deps import StateDep
from app.api.schemas.audit import AuditAction
from app.services import audit as audit_service
from app.services.audit import ACTIONS
from app.ui.render import page, ui_router
from app.ui.scope import PAGE_SIZE, TenantQuery, scoped_tenant
from app.ui.sessions import SessionDep

router = ui_router()


@router.get("/audit")
async def audit(
    request: Request,
    state: StateDep,
    session: SessionDep,
    tenant: TenantQuery = None,
    action: AuditAction | None = None,
    cursor: Annotated[str | None, Query(max_length=256)] = None,
) -> Response:
    """Who changed what, when, by which request: keyset-paged like the Runs page, of one action
    where chosen."""
    tenant_id = scoped_tenant(session, tenant)
    events = await audit_service.list_events(
        state.pool,
        tenant_id,
        action=action,
        after=decode_cursor(cursor) if cursor else None,
        limit=PAGE_SIZE,
    )
    last = events[-1] if len(events) == PAGE_SIZE else None
    return page(
        request,
        "audit.html",
        session=session,
        tenant=tenant_id,
        events=events,
        actions=ACTIONS,
        filters={"tenant": tenant, "action": action},
        next_cursor=encode_cursor(last.at, last.id) if last else None,
    )
