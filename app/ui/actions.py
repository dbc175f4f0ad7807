"""What the dashboard changes: each a form post carrying the session's CSRF token (sessions.FormDep),
answered with a redirect to the page that shows the result (post/redirect/get), or with the form
again saying what was wrong. Each calls the same service as the HTTP API's route for it."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode
from uuid import UUID

from fastapi import Path, Request, Response
from fastapi.responses import RedirectResponse
from pydantic import ValidationError

from app.api.deps import StateDep
from app.api.jobs import put_job
from app.api.schemas.common import JOB_NAME_PATTERN, TENANT_ID_PATTERN
from app.api.schemas.jobs import JobPut
from app.errors import Conflict, InvalidInput
from app.services import flow as flow_service
from app.services import run_actions as action_service
from app.services import runs as run_service
from app.services.audit import AuditContext
from app.services.run_actions import Action
from app.services.run_requests import RunRequest, Submission
from app.ui.pages.failures import BULK_LIMIT, failure_filter
from app.ui.pages.jobs import job_editor
from app.ui.pages.runs import run_page
from app.ui.render import ui_router
from app.ui.scope import moment, scoped_tenant, scoped_tenant_of_run
from app.ui.sessions import FormDep, SessionDep, UiAuditDep

router = ui_router()
JobName = Annotated[str, Path(pattern=JOB_NAME_PATTERN)]
TenantId = Annotated[str, Path(pattern=TENANT_ID_PATTERN)]


def _tenant_of(form: dict[str, str]) -> str | None:
    return form.get("tenant") or None


def _query(tenant: str | None) -> str:
    return f"?tenant={tenant}" if tenant else ""  # a tenant id is [a-z0-9_-]: nothing to encode


@router.post("/runs/{run_id}/cancel")
async def cancel_run(
    run_id: UUID, state: StateDep, session: SessionDep, form: FormDep, audit: UiAuditDep
) -> Response:
    await run_service.cancel_run(
        state.pool, run_id, session.principal.tenant_id, state.stop_running, audit=audit
    )
    return RedirectResponse(f"/ui/runs/{run_id}", status_code=303)


@router.post("/runs/{run_id}/retry")
async def retry_run(
    run_id: UUID, state: StateDep, session: SessionDep, form: FormDep, audit: UiAuditDep
) -> Response:
    """A failed, cancelled or expired run back to pending, due now: what POST /runs/{id}/retry does."""
    await run_service.retry_run(
        state.pool, state.admission, run_id, session.principal.tenant_id, None, audit=audit
    )
    return RedirectResponse(f"/ui/runs/{run_id}", status_code=303)


@router.post("/runs/{run_id}/reschedule")
async def reschedule_run(
    request: Request, run_id: UUID, state: StateDep, session: SessionDep, form: FormDep, audit: UiAuditDep
) -> Response:
    """A pending run's new due time (the form's datetime-local, UTC): what POST /runs/{id}/reschedule
    does, by the same service and rules. A refusal is the Run page again, saying why."""
    typed = form.get("due_at", "")
    try:
        due_at = moment(typed, "due_at")
        if due_at is None:
            raise InvalidInput("give the new due time", field="due_at")
        await run_service.reschedule_run(
            state.pool,
            run_id,
            session.principal.tenant_id,
            due_at,
            state.settings.max_schedule_ahead_days,
            audit=audit,
        )
    except (InvalidInput, Conflict) as exc:
        return await run_page(request, state, session, run_id, exc, typed)
    return RedirectResponse(f"/ui/runs/{run_id}", status_code=303)


async def _pause_job(
    name: str, paused: bool, state: StateDep, session: SessionDep, form: dict[str, str], audit: AuditContext
) -> Response:
    tenant = _tenant_of(form)
    await flow_service.set_job_paused(state.pool, scoped_tenant(session, tenant), name, paused, audit=audit)
    return RedirectResponse(f"/ui/jobs{_query(tenant)}", status_code=303)


@router.post("/jobs/{name}/pause")
async def pause_job(
    name: JobName, state: StateDep, session: SessionDep, form: FormDep, audit: UiAuditDep
) -> Response:
    """Holds the job's pending runs and its cron: POST /tenants/{id}/jobs/{name}/pause's service."""
    return await _pause_job(name, True, state, session, form, audit)


@router.post("/jobs/{name}/resume")
async def resume_job(
    name: JobName, state: StateDep, session: SessionDep, form: FormDep, audit: UiAuditDep
) -> Response:
    """Releases the job's held runs: POST /tenants/{id}/jobs/{name}/resume's service."""
    return await _pause_job(name, False, state, session, form, audit)


async def _pause_tenant(
    tenant_id: str, paused: bool, state: StateDep, session: SessionDep, audit: AuditContext
) -> Response:
    session.principal.require_admin()  # as the API's: a tenant session gets 404
    await flow_service.set_tenant_paused(state.pool, tenant_id, paused, audit=audit)
    return RedirectResponse("/ui/admin", status_code=303)


@router.post("/tenants/{tenant_id}/pause")
async def pause_tenant(
    tenant_id: TenantId, state: StateDep, session: SessionDep, form: FormDep, audit: UiAuditDep
) -> Response:
    """Holds every pending run of the tenant (the admin only): POST /tenants/{id}/pause's service."""
    return await _pause_tenant(tenant_id, True, state, session, audit)


@router.post("/tenants/{tenant_id}/resume")
async def resume_tenant(
    tenant_id: TenantId, state: StateDep, session: SessionDep, form: FormDep, audit: UiAuditDep
) -> Response:
    """Releases the tenant's held runs (the admin only): POST /tenants/{id}/resume's service."""
    return await _pause_tenant(tenant_id, False, state, session, audit)


@router.post("/failures/act")
async def act_on_failures(state: StateDep, session: SessionDep, form: FormDep, audit: UiAuditDep) -> Response:
    """A confirmed bulk retry or cancel of a Failures group (named by one of its runs), through the
    service behind POST /tenants/{id}/runs/actions; the Failures page then says what it matched and
    changed. Over the tenant's backlog quota before anything changed: the 429 page, nothing written."""
    tenant = _tenant_of(form)
    try:
        run_id = UUID(form.get("run", ""))
        action: Action = {"retry": "retry", "cancel": "cancel"}[form.get("action", "")]  # type: ignore[assignment]
        days = int(form.get("days", "1"))
    except (ValueError, KeyError):
        raise InvalidInput("the form's run, action or days is not valid", field="body") from None
    if not 1 <= days <= 30:
        raise InvalidInput("days must be from 1 to 30", field="days")
    record = await run_service.get_run(state.pool, run_id, scoped_tenant_of_run(session, tenant))
    outcome = await action_service.act_on_runs(
        state.pool,
        state.admission,
        state.stop_running,
        record["tenant_id"],
        action,
        failure_filter(record, action, days),
        BULK_LIMIT,
        None,
        audit=audit,
    )
    query = urlencode(
        {
            **({"tenant": tenant} if tenant else {}),
            "days": days,
            "done": action,
            "matched": outcome.matched,
            "changed": outcome.changed,
        }
    )
    return RedirectResponse(f"/ui/failures?{query}", status_code=303)


@router.post("/jobs/{name}/trigger")
async def trigger_job(
    request: Request, name: JobName, state: StateDep, session: SessionDep, form: FormDep, audit: UiAuditDep
) -> Response:
    """A run of the job now, with its default payload: what POST /tenants/{id}/runs {"job"} does."""
    tenant_id = scoped_tenant(session, _tenant_of(form))
    submission = Submission(
        tenant_id,
        [RunRequest(name, None, None, None)],
        traceparent=request.headers.get("traceparent"),
        audit=audit,
    )
    [submitted] = (await state.submitter.submit(submission)).runs
    return RedirectResponse(f"/ui/runs/{submitted.run['id']}", status_code=303)


@router.post("/jobs/{name}")
async def save_job(
    request: Request, name: JobName, state: StateDep, session: SessionDep, form: FormDep, audit: UiAuditDep
) -> Response:
    """Validated by the API's own JobPut and saved by the same service as PUT /tenants/{id}/jobs/{name}."""
    tenant = _tenant_of(form)
    tenant_id = scoped_tenant(session, tenant)
    text = form.get("definition", "")
    try:
        await put_job(state, tenant_id, name, JobPut.model_validate_json(text), audit)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
        return job_editor(request, session, tenant_id, tenant, name, text, problems)
    except InvalidInput as exc:
        return job_editor(request, session, tenant_id, tenant, name, text, f"{exc.field}: {exc.message}")
    return RedirectResponse(f"/ui/jobs{_query(tenant)}", status_code=303)
