"""The dashboard's pages (GET only; what changes something is in actions.py). Each page reads
through the same services as the HTTP API, scoped to the session's tenant; the admin picks one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated
from uuid import UUID

import orjson
from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import RedirectResponse

from app.api.cursors import decode_cursor, encode_cursor
from app.api.deps import StateDep
from app.api.schemas.common import JOB_NAME_PATTERN, TENANT_ID_PATTERN
from app.api.schemas.jobs import JobPut
from app.api.schemas.runs import RunStatusName
from app.domain import CANCELLABLE, JobRecord, RunRecord, RunStatus
from app.errors import AppError, InvalidInput
from app.services import cron, dashboard
from app.services import jobs as job_service
from app.services import runs as run_service
from app.services import tenants as tenant_service
from app.services.run_actions import Action, RunFilter, count_matching
from app.services.ui_sessions import UiSession
from app.ui import charts
from app.ui.render import UiRoute, page
from app.ui.sessions import SessionDep

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)
PAGE_SIZE = 50
NEXT_FIRES = 5
BULK_LIMIT = 10_000  # a bulk action's runs per request, the API's own most (RunAction.limit)
DATETIME_LOCAL = "%Y-%m-%dT%H:%M"  # what <input type="datetime-local"> sends
TenantQuery = Annotated[str | None, Query(pattern=TENANT_ID_PATTERN)]
JobQuery = Annotated[str | None, Query(pattern=JOB_NAME_PATTERN)]
MomentQuery = Annotated[str | None, Query(max_length=64)]
DaysQuery = Annotated[int, Query(ge=1, le=30)]


def scoped_tenant(session: UiSession, tenant: str | None) -> str:
    """The tenant a page shows: a tenant session's own (naming another is 404); the admin's choice."""
    principal = session.principal
    if principal.tenant_id is not None:
        if tenant is not None:
            principal.require_tenant(tenant)
        return principal.tenant_id
    if tenant is None:
        raise InvalidInput("choose a tenant on the Admin page", field="tenant")
    return tenant


@router.get("")
async def overview(request: Request, state: StateDep, session: SessionDep) -> Response:
    """Runs per status, throughput, due lag, failure ratio, oldest due run: one tenant's, or all."""
    figures = await dashboard.overview(state.pool, session.principal.tenant_id)
    now = datetime.now(UTC)
    minutes = [
        (now - timedelta(minutes=len(figures.per_minute) - 1 - i)).strftime("%H:%M")
        for i in range(len(figures.per_minute))
    ]
    return page(
        request,
        "overview.html",
        session=session,
        figures=figures,
        held_limit=dashboard.HELD_LIMIT,
        status_bars=charts.rows(list(figures.counts.values()), list(figures.counts), 400, 24),
        minute_bars=charts.columns(figures.per_minute, minutes, 600, 120),
    )


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
    cursor: Annotated[str | None, Query(max_length=256)] = None,
) -> Response:
    """Newest first, keyset-paged like GET /tenants/{id}/runs, scheduled within the time range
    given (UTC, as every time on the pages); an id goes straight to its run."""
    if run_id:
        try:
            found = UUID(run_id.strip())
        except ValueError:
            raise InvalidInput("not a run id", field="id") from None
        return RedirectResponse(f"/ui/runs/{found}", status_code=303)
    tenant_id = scoped_tenant(session, tenant)
    listed = await run_service.list_runs(
        state.pool,
        tenant_id,
        status=RunStatus(status) if status else None,
        job=job,
        scheduled_after=moment(scheduled_after, "scheduled_after"),
        scheduled_before=moment(scheduled_before, "scheduled_before"),
        after=decode_cursor(cursor) if cursor else None,
        limit=PAGE_SIZE,
    )
    last = listed[-1] if len(listed) == PAGE_SIZE else None
    next_cursor = encode_cursor(last["scheduled_at"], last["id"]) if last else None
    filters = {
        "tenant": tenant,
        "status": status,
        "job": job,
        "scheduled_after": scheduled_after,
        "scheduled_before": scheduled_before,
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
        error=f"{error.field}: {error.message}" if error else None,
        late=late,
        reschedulable=record["status"] == RunStatus.PENDING,
        due_at=due_at or datetime.now(UTC).strftime(DATETIME_LOCAL),
        session=session,
        tenant=record["tenant_id"],
        run=record,
        trace_id=trace_id,
        cancellable=record["status"] in CANCELLABLE,
        retryable=record["status"] in (RunStatus.FAILED, RunStatus.CANCELLED),
        live=record["status"] not in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED),
    )


def moment(value: str | None, field: str) -> datetime | None:
    """A time from a datetime-local input (no zone: UTC, as the pages show every time), or ISO 8601
    with its offset; empty is none."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(f"not a date and time: {value!r}", field=field) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def failure_filter(record: RunRecord, action: Action, days: int) -> RunFilter:
    """The runs a Failures group's bulk action takes: those of the group's job and error scheduled
    in the page's last `days` days that the action applies to. A retry takes the failed ones; a
    cancel, the pending or dispatched ones still retrying after that error."""
    return RunFilter(
        statuses=[RunStatus.FAILED] if action == "retry" else list(CANCELLABLE),
        job=record["job"],
        error=(record["last_error"],),
        scheduled_after=datetime.now(UTC) - timedelta(days=days),
    )


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


@router.get("/failures")
async def failures(
    request: Request,
    state: StateDep,
    session: SessionDep,
    tenant: TenantQuery = None,
    days: DaysQuery = 1,
    done: Annotated[Action | None, Query()] = None,
    matched: Annotated[int | None, Query(ge=0)] = None,
    changed: Annotated[int | None, Query(ge=0)] = None,
) -> Response:
    """Failed runs of the last `days` days grouped by job and error, most frequent first; after a
    bulk action (`done`), what it matched and changed."""
    tenant_id = scoped_tenant(session, tenant)
    groups = await dashboard.failure_groups(state.pool, tenant_id, days, limit=100)
    return page(
        request,
        "failures.html",
        session=session,
        tenant=tenant_id,
        admin_tenant=tenant,
        groups=groups,
        days=days,
        done=done,
        matched=matched,
        changed=changed,
        bulk_limit=BULK_LIMIT,
    )


@router.get("/failures/confirm")
async def confirm_failures(
    request: Request,
    state: StateDep,
    session: SessionDep,
    run_id: Annotated[UUID, Query(alias="run")],
    action: Annotated[Action, Query()],
    tenant: TenantQuery = None,
    days: DaysQuery = 1,
) -> Response:
    """The confirmation of a bulk action on a Failures group, named by one of its runs: how many
    runs it would take, before anything changes."""
    record = await run_service.get_run(state.pool, run_id, scoped_tenant_of_run(session, tenant))
    count = await count_matching(
        state.pool, record["tenant_id"], failure_filter(record, action, days), BULK_LIMIT
    )
    return page(
        request,
        "confirm.html",
        session=session,
        tenant=record["tenant_id"],
        admin_tenant=tenant,
        run=record,
        action=action,
        days=days,
        count=count,
        bulk_limit=BULK_LIMIT,
    )


def scoped_tenant_of_run(session: UiSession, tenant: str | None) -> str | None:
    """The tenant whose runs a run id may name: a tenant session's own; the admin's choice (or any)."""
    principal = session.principal
    if principal.tenant_id is not None:
        if tenant is not None:
            principal.require_tenant(tenant)
        return principal.tenant_id
    return tenant


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
