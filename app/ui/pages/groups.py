"""The Groups list and a Group's page: its progress, refreshed while it is open, and its runs."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import Query, Request, Response

from app.api.cursors import decode_cursor, encode_cursor
from app.api.deps import StateDep
from app.services import groups as group_service
from app.services import runs as run_service
from app.ui.render import page, ui_router
from app.ui.scope import PAGE_SIZE, TenantQuery, scoped_tenant
from app.ui.sessions import SessionDep

router = ui_router()


@router.get("/groups")
async def groups(
    request: Request,
    state: StateDep,
    session: SessionDep,
    tenant: TenantQuery = None,
    cursor: Annotated[str | None, Query(max_length=256)] = None,
) -> Response:
    """Newest first, keyset-paged like GET /tenants/{id}/groups."""
    tenant_id = scoped_tenant(session, tenant)
    listed = await group_service.list_groups(
        state.pool, tenant_id, decode_cursor(cursor) if cursor else None, PAGE_SIZE
    )
    last = listed[-1] if len(listed) == PAGE_SIZE else None
    return page(
        request,
        "groups.html",
        session=session,
        tenant=tenant_id,
        groups=listed,
        filters={"tenant": tenant},
        next_cursor=encode_cursor(last["created_at"], last["id"]) if last else None,
        first_page=cursor is None,
    )


@router.get("/groups/{group_id}")
async def group(
    request: Request, group_id: UUID, state: StateDep, session: SessionDep, tenant: TenantQuery = None
) -> Response:
    """A group's counts by status, its completion, and its newest runs (all of them: the Runs
    page filtered by the group)."""
    tenant_id = scoped_tenant(session, tenant)
    found = await group_service.get_group(state.pool, tenant_id, group_id)
    runs = await run_service.list_runs(
        state.pool, tenant_id, status=None, job=None, after=None, limit=PAGE_SIZE, group=group_id
    )
    return page(
        request,
        "group.html",
        session=session,
        tenant=tenant_id,
        group=found,
        runs=runs,
        filters={"tenant": tenant},
        live=found["fired_at"] is None,
    )
