"""Job definitions: upsert, read, list, delete, and a cron job's backfill."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query, Response

from app.api.deps import AuditDep, PrincipalDep, State, StateDep
from app.api.routers import api_router
from app.api.schemas.common import JOB_NAME_PATTERN, TENANT_ID_PATTERN, error_responses, json_response
from app.api.schemas.jobs import Backfill, BackfillResult, Job, JobList, JobPut, job_out
from app.domain import JobRecord
from app.services import backfill as backfill_service
from app.services import jobs as job_service
from app.services.audit import AuditContext
from app.services.validation import check_schedule_window

router = api_router(tags=["jobs"])
ERRORS = error_responses(401, 403, 404, 413, 422)
JobNamePath = Annotated[str, Path(pattern=JOB_NAME_PATTERN, examples=["send-report"])]
# A tenant id that cannot exist is refused before any query (a NUL in it was a 500 in Postgres).
TenantIdPath = Annotated[str, Path(pattern=TENANT_ID_PATTERN)]


@router.put(
    "/tenants/{tenant_id}/jobs/{name}",
    response_model=Job,
    responses=error_responses(401, 403, 404, 413, 422, success={201: Job}),
    name="put_job",
)
async def upsert_job(
    tenant_id: TenantIdPath,
    name: JobNamePath,
    body: JobPut,
    state: StateDep,
    principal: PrincipalDep,
    audit: AuditDep,
    response: Response,
) -> Job:
    """Create (201) or replace (200) a job. A schedule makes it a cron job; next_fire_at shows when."""
    principal.require_tenant(tenant_id)
    row, created = await put_job(state, tenant_id, name, body, audit)
    response.status_code = 201 if created else 200
    return job_out(row)


async def put_job(
    state: State, tenant_id: str, name: str, body: JobPut, audit: AuditContext
) -> tuple[JobRecord, bool]:
    """The upsert with this deployment's limits: the API's PUT and the dashboard's editor."""
    return await job_service.put_job(
        state.pool,
        tenant_id,
        name,
        body.model_dump(),
        allow_private_targets=state.settings.allow_private_targets,
        max_payload_bytes=state.settings.max_payload_bytes,
        max_payload_depth=state.settings.max_payload_depth,
        max_jobs=state.settings.tenant_max_jobs,
        audit=audit,
    )


@router.get("/tenants/{tenant_id}/jobs", response_model=JobList, responses=ERRORS)
async def list_jobs(
    tenant_id: TenantIdPath,
    state: StateDep,
    principal: PrincipalDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    # The cursor is the last job name of the previous page; the pattern also keeps a NUL (which
    # Postgres text refuses: a 500) out of the query.
    cursor: Annotated[str | None, Query(pattern=JOB_NAME_PATTERN)] = None,
) -> JobList:
    principal.require_tenant(tenant_id)
    rows = await job_service.list_jobs(state.pool, tenant_id, cursor, limit)
    return JobList(
        jobs=[job_out(r) for r in rows], next_cursor=rows[-1]["name"] if len(rows) == limit else None
    )


@router.get("/tenants/{tenant_id}/jobs/{name}", response_model=Job, responses=ERRORS)
async def get_job(
    tenant_id: TenantIdPath, name: JobNamePath, state: StateDep, principal: PrincipalDep
) -> Job:
    principal.require_tenant(tenant_id)
    return job_out(await job_service.get_job(state.pool, tenant_id, name))


@router.delete("/tenants/{tenant_id}/jobs/{name}", status_code=204, responses=ERRORS)
async def delete_job(
    tenant_id: TenantIdPath, name: JobNamePath, state: StateDep, principal: PrincipalDep, audit: AuditDep
) -> Response:
    """Delete a job and cancel its runs that no worker has started."""
    principal.require_tenant(tenant_id)
    await job_service.delete_job(state.pool, tenant_id, name, audit=audit)
    return Response(status_code=204)


@router.post(
    "/tenants/{tenant_id}/jobs/{name}/backfill",
    response_model=BackfillResult,
    responses=error_responses(401, 403, 404, 409, 413, 422, 429),
)
async def backfill_job(
    tenant_id: TenantIdPath,
    name: JobNamePath,
    body: Backfill,
    state: StateDep,
    principal: PrincipalDep,
    audit: AuditDep,
) -> Response:
    """Make the cron job's occurrences in [from, to) into runs, each at most once however often it is
    asked (a run the schedule or an earlier backfill made is counted in `existing`), at most 1000 per
    request, within the tenant's backlog quota (429). A job without a schedule is 409."""
    principal.require_tenant(tenant_id)
    ahead, behind = state.settings.max_schedule_ahead_days, state.settings.max_schedule_behind_days
    check_schedule_window(body.start, ahead_days=ahead, behind_days=behind, field="from")
    check_schedule_window(body.end, ahead_days=ahead, behind_days=behind, field="to")
    done = await backfill_service.backfill(
        state.pool, state.admission, tenant_id, name, body.start, body.end, audit=audit
    )
    return json_response({"runs": done.runs, "existing": done.existing})
