"""The Admin page: the tenants and their keys' ids, where the admin picks the tenant the pages show."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request, Response

from app.api.deps import StateDep
from app.api.schemas.common import TENANT_ID_PATTERN
from app.services import tenants as tenant_service
from app.ui.render import page, ui_router
from app.ui.scope import PAGE_SIZE
from app.ui.sessions import SessionDep

router = ui_router()


@router.get("/admin")
async def admin(
    request: Request,
    state: StateDep,
    session: SessionDep,
    cursor: Annotated[str | None, Query(pattern=TENANT_ID_PATTERN)] = None,
) -> Response:
    """Tenants and their keys' ids (never a secret). The admin only: a tenant session gets 404."""
    session.principal.require_admin()
    listed = await tenant_service.list_tenants(state.pool, cursor, PAGE_SIZE)
    return page(
        request,
        "admin.html",
        session=session,
        tenants=listed,
        next_cursor=listed[-1].id if len(listed) == PAGE_SIZE else None,
    )
