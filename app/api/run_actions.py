"""Bulk actions on a tenant's runs by filter (cancel, retry), processed in chunks, resumable."""

from __future__ import annotations

from fastapi import Response

from app.api.cursors import decode_cursor, encode_cursor
from app.api.deps import AuditDep, PrincipalDep, StateDep
from app.api.routers import api_router
from app.api.runs import TenantIdPath
from app.api.schemas.common import error_responses, json_response
from app.api.schemas.runs import RunAction, RunActionResult
from app.domain import RunStatus
from app.services import run_actions as action_service
from app.services.run_actions import RunFilter

router = api_router(tags=["runs"])


@router.post(
    "/tenants/{tenant_id}/runs/actions",
    response_model=RunActionResult,
    responses=error_responses(401, 403, 404, 413, 422, 429),
)
async def act_on_runs(
    tenant_id: TenantIdPath, body: RunAction, state: StateDep, principal: PrincipalDep, audit: AuditDep
) -> Response:
    """Cancel (pending, dispatched or running: a running run's worker is told to stop it, as
    POST /runs/{run_id}/cancel does) or retry (failed or cancelled) up to `limit` of the tenant's
    runs matching `filter`, newest scheduled first, in chunks that never hold locks for long. A run
    already in the target state is not changed again, so a request can be repeated; when
    `next_cursor` is not null, send it back as `cursor` to go on. A retry over the tenant's backlog
    quota: 429 if nothing was changed yet, otherwise the runs changed so far and a `next_cursor`
    where it stopped."""
    principal.require_tenant(tenant_id)
    f = body.filter
    runs = RunFilter(
        statuses=[RunStatus(s) for s in f.status] if f.status is not None else None,
        job=f.job,
        ids=f.ids,
        scheduled_after=f.scheduled_after,
        scheduled_before=f.scheduled_before,
        tags=f.tags,
    )
    cursor = decode_cursor(body.cursor) if body.cursor else None
    outcome = await action_service.act_on_runs(
        state.pool,
        state.admission,
        state.stop_running,
        tenant_id,
        body.action,
        runs,
        body.limit,
        cursor,
        audit=audit,
    )
    at = outcome.next_cursor
    return json_response(
        {
            "matched": outcome.matched,
            "changed": outcome.changed,
            "next_cursor": encode_cursor(*at) if at is not None else None,
        }
    )
