"""The Runs list and the Run page (which the reschedule action answers with again when it refuses)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated
from uuid import UUID

from fastapi import Query, Request, Response
from fastapi.responses import RedirectResponse

from app.api.cursors import decode_cursor, encode_cursor
from app.api.deps import StateDep
from app.api.schemas.runs import RunStatusName
from app.domain import CANCELLABLE, FINISHED, RETRYABLE, RunStatus
from app.errors import AppError, InvalidInput
from app.services import dashboard, dependencies
from app.services import runs as run_service
from app.services.ui_sessions import UiSession
from app.ui.render import page, ui_router
from app.ui.scope import (
    PAGE_SIZE,
    JobQuery,
    MomentQuery,
    TagsQuery,
    TenantQuery,
    moment,
    scoped_tenant,
    tags_of,
)
from app.ui.sessions import SessionDep

router = ui_router()
DATETIME_LOCAL = "%Y-%m-%dT%H:%M"  # what <input type="datetime-local"> sends


@router.get("/runs")
async def runs(
    request: Request,
    state: StateDep,
    session: SessionDep,
    tenant: TenantQuery = None,
    status: RunStatusName | None = None,
    job: JobQuery = None,
    run_id: Annotated[str | None, Query(alias="id", max_length=64)] = None,
    scheduled_after: MomentQuery = None,
    scheduled_before: MomentQuery = None,
    tags: TagsQuery = None,
    group: Annotated[str | None, Query(max_length=64)] = None,
    cursor: Annotated[str | None, Query(max_length=256)] = None,
) -> Response:
    """Newest first, keyset-paged like GET /tenants/{id}/runs, scheduled within the time range
    given (UTC, as every time on the pages) and carrying every tag given; an id goes straight to
    its run."""
    if run_id:
        try:
            found = UUID(run_id.strip())
        except ValueError:
            raise InvalidInput("not a run id", field="id") from None
        return RedirectResponse(f"/ui/runs/{found}", status_code=303)
    tenant_id = scoped_tenant(session, tenant)
    try:
        group_id = UUID(group.strip()) if group and group.strip() else None
    except ValueError:
        raise InvalidInput("not a group id", field="group") from None
    listed = await run_service.list_runs(
        state.pool,
        tenant_id,
        status=RunStatus(status) if status else None,
        job=job,
        scheduled_after=moment(scheduled_after, "scheduled_after"),
        scheduled_before=moment(scheduled_before, "scheduled_before"),
        tags=tags_of(tags),
        after=decode_cursor(cursor) if cursor else None,
        limit=PAGE_SIZE,
        group=group_id,
    )
    last = listed[-1] if len(listed) == PAGE_SIZE else None
    next_cursor = encode_cursor(last["scheduled_at"], last["id"]) if last else None
    filters = {
        "tenant": tenant,
        "status": status,
        "job": job,
        "scheduled_after": scheduled_after,
        "scheduled_before": scheduled_before,
        "tags": tags,
        "group": group,
    }
    return page(
        request,
        "runs.html",
        session=session,
        tenant=tenant_id,
        runs=listed,
        filters=filters,
        statuses=[s.value for s in RunStatus],
        next_cursor=next_cursor,
        first_page=cursor is None,
    )


@router.get("/runs/{run_id}")
async def run(request: Request, run_id: UUID, state: StateDep, session: SessionDep) -> Response:
    return await run_page(request, state, session, run_id)


async def run_page(
    request: Request,
    state: StateDep,
    session: UiSession,
    run_id: UUID,
    error: AppError | None = None,
    due_at: str | None = None,
) -> Response:
    """The Run page; with `error` (a refused reschedule), answered with its status and saying what
    was wrong, the form keeping `due_at` as typed."""
    tenant_id = session.principal.tenant_id
    record, traceparent = await run_service.get_run_and_trace(state.pool, run_id, tenant_id)
    # traceparent is version-traceid-parentid-flags (W3C): the trace id is the second field.
    trace_id = traceparent.split("-")[1] if traceparent and traceparent.count("-") == 3 else None
    late = None
    if record["status"] == RunStatus.PENDING:
        late = await dashboard.why_late(state.pool, run_id, tenant_id, state.settings.tenant_max_pending)
    return page(
        request,
        "run.html",
        error.status_code if error else 200,
        dependents=await dependencies.dependents(state.pool, record),
        error=f"{error.field}: {error.message}" if error else None,
        late=late,
        reschedulable=record["status"] == RunStatus.PENDING,
        due_at=due_at or datetime.now(UTC).strftime(DATETIME_LOCAL),
        session=session,
        tenant=record["tenant_id"],
        run=record,
        trace_id=trace_id,
        cancellable=record["status"] in CANCELLABLE,
        retryable=record["status"] in RETRYABLE,
        live=record["status"] not in FINISHED,
    )
