"""Flow control: pause and resume a job (its tenant) or a whole tenant (the admin)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

from app.api.deps import AuditDep, PrincipalDep, StateDep
from app.api.routers import api_router
from app.api.schemas.common import JOB_NAME_PATTERN, TENANT_ID_PATTERN, error_responses
from app.api.schemas.jobs import Job, job_out
from app.api.schemas.tenants import TenantPause
from app.services import flow as flow_service

router = api_router(tags=["flow control"])
ERRORS = error_responses(401, 404, 422)
JOB_ERRORS = error_responses(401, 403, 404, 422)  # a key without jobs:write is refused
JobNamePath = Annotated[str, Path(pattern=JOB_NAME_PATTERN, examples=["send-report"])]
TenantIdPath = Annotated[str, Path(pattern=TENANT_ID_PATTERN)]


async def _job(
    tenant_id: str, name: str, paused: bool, state: StateDep, principal: PrincipalDep, audit: AuditDep
) -> Job:
    principal.require_tenant(tenant_id)
    job = await flow_service.set_job_paused(state.pool, tenant_id, name, paused, audit=audit)
    return job_out(job)


@router.post("/tenants/{tenant_id}/jobs/{name}/pause", response_model=Job, responses=JOB_ERRORS)
async def pause_job(
    tenant_id: TenantIdPath, name: JobNamePath, state: StateDep, principal: PrincipalDep, audit: AuditDep
) -> Job:
    """Hold every pending run of the job, and its cron. Runs already dispatched or running finish."""
    return await _job(tenant_id, name, True, state, principal, audit)


@router.post("/tenants/{tenant_id}/jobs/{name}/resume", response_model=Job, responses=JOB_ERRORS)
async def resume_job(
    tenant_id: TenantIdPath, name: JobNamePath, state: StateDep, principal: PrincipalDep, audit: AuditDep
) -> Job:
    """Release the job's held runs: those already due go at once, oldest first. Its cron fires
    again from now; occurrences missed while paused are not made up."""
    return await _job(tenant_id, name, False, state, principal, audit)


async def _tenant(
    tenant_id: str, paused: bool, state: StateDep, principal: PrincipalDep, audit: AuditDep
) -> TenantPause:
    principal.require_admin()
    await flow_service.set_tenant_paused(state.pool, tenant_id, paused, audit=audit)
    return TenantPause(id=tenant_id, paused=paused)


@router.post("/tenants/{tenant_id}/pause", response_model=TenantPause, responses=ERRORS)
async def pause_tenant(
    tenant_id: TenantIdPath, state: StateDep, principal: PrincipalDep, audit: AuditDep
) -> TenantPause:
    """Hold every pending run of the tenant (admin token only); its new runs are held as they come."""
    return await _tenant(tenant_id, True, state, principal, audit)


@router.post("/tenants/{tenant_id}/resume", response_model=TenantPause, responses=ERRORS)
async def resume_tenant(
    tenant_id: TenantIdPath, state: StateDep, principal: PrincipalDep, audit: AuditDep
) -> TenantPause:
    """Release the tenant's held runs (admin token only), except those of jobs paused on their own."""
    return await _tenant(tenant_id, False, state, principal, audit)
