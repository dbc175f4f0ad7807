"""The Jobs list with each job's next fires, and the job editor (which the save action answers with
again when it refuses)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

import orjson
from fastapi import Path, Query, Request, Response

from app.api.deps import StateDep
from app.api.schemas.common import JOB_NAME_PATTERN
from app.api.schemas.jobs import JobPut
from app.domain import JobRecord
from app.services import cron
from app.services import jobs as job_service
from app.ui.render import page, ui_router
from app.ui.scope import PAGE_SIZE, TenantQuery, scoped_tenant
from app.ui.sessions import SessionDep

router = ui_router()
NEXT_FIRES = 5


def _next_fires(job: JobRecord, now: datetime) -> list[datetime]:
    if job["schedule"] is None or job["paused"]:
        return []
    return cron.occurrences_between(
        job["schedule"], job["timezone"], now, now + timedelta(days=400), NEXT_FIRES
    )


@router.get("/jobs")
async def jobs(
    request: Request,
    state: StateDep,
    session: SessionDep,
    tenant: TenantQuery = None,
    cursor: Annotated[str | None, Query(pattern=JOB_NAME_PATTERN)] = None,
) -> Response:
    tenant_id = scoped_tenant(session, tenant)
    listed = await job_service.list_jobs(state.pool, tenant_id, cursor, PAGE_SIZE)
    now = datetime.now(UTC)
    return page(
        request,
        "jobs.html",
        session=session,
        tenant=tenant_id,
        admin_tenant=tenant,
        jobs=[(job, _next_fires(job, now)) for job in listed],
        next_cursor=listed[-1]["name"] if len(listed) == PAGE_SIZE else None,
    )


@router.get("/jobs/{name}")
async def edit_job(
    request: Request,
    name: Annotated[str, Path(pattern=JOB_NAME_PATTERN)],
    state: StateDep,
    session: SessionDep,
    tenant: TenantQuery = None,
) -> Response:
    """The job's definition as the API's PUT body, to edit and save."""
    tenant_id = scoped_tenant(session, tenant)
    job = await job_service.get_job(state.pool, tenant_id, name)
    definition = JobPut.model_validate({k: job[k] for k in JobPut.model_fields}).model_dump(mode="json")  # type: ignore[literal-required]
    return job_editor(
        request,
        session,
        tenant_id,
        tenant,
        name,
        orjson.dumps(definition, option=orjson.OPT_INDENT_2).decode(),
    )


def job_editor(
    request: Request,
    session: SessionDep,
    tenant_id: str,
    admin_tenant: str | None,
    name: str,
    definition: str,
    error: str | None = None,
) -> Response:
    return page(
        request,
        "job_edit.html",
        422 if error else 200,
        session=session,
        tenant=tenant_id,
        admin_tenant=admin_tenant,
        name=name,
        definition=definition,
        error=error,
    )
