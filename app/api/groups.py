"""Groups: a group's progress, a tenant's groups. A batch makes a group, a run joins one (runs.py)."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import Path, Query, Response

from app.api.cursors import decode_cursor, encode_cursor
from app.api.deps import PrincipalDep, StateDep
from app.api.routers import api_router
from app.api.schemas.common import TENANT_ID_PATTERN, error_responses, json_response
from app.api.schemas.groups import Group, GroupList
from app.services import groups as group_service

router = api_router(tags=["groups"])
ERRORS = error_responses(401, 403, 404, 422)
TenantIdPath = Annotated[str, Path(pattern=TENANT_ID_PATTERN)]


@router.get("/tenants/{tenant_id}/groups/{group_id}", response_model=Group, responses=ERRORS)
async def get_group(
    tenant_id: TenantIdPath, group_id: UUID, state: StateDep, principal: PrincipalDep
) -> Response:
    """A group's progress: its runs counted by status, and once every one has ended, when it
    completed and what its completion made (`completion_run_id`, or the callback's delivery). Its
    runs: GET /tenants/{tenant_id}/runs?group={group_id}."""
    principal.require_tenant(tenant_id)
    return json_response(await group_service.get_group(state.pool, tenant_id, group_id))


@router.get("/tenants/{tenant_id}/groups", response_model=GroupList, responses=ERRORS)
async def list_groups(
    tenant_id: TenantIdPath,
    state: StateDep,
    principal: PrincipalDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    cursor: Annotated[str | None, Query(max_length=256)] = None,
) -> Response:
    """A tenant's groups, newest first, keyset-paginated: pass next_cursor back as cursor."""
    principal.require_tenant(tenant_id)
    groups = await group_service.list_groups(
        state.pool, tenant_id, decode_cursor(cursor) if cursor else None, limit
    )
    last = groups[-1] if len(groups) == limit else None
    return json_response(
        {"groups": groups, "next_cursor": encode_cursor(last["created_at"], last["id"]) if last else None}
    )
