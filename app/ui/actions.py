"""What the dashboard changes: each a form post carrying the session's CSRF token (sessions.FormDep),
answered with a redirect to the page that shows the result (post/redirect/get), or with the form
again saying what was wrong. Each calls the same service as the HTTP API's route for it."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import RedirectResponse
from pydantic import ValidationError

from app.api.deps import StateDep
from app.api.jobs import put_job
from app.api.schemas import JOB_NAME_PATTERN, JobPut
from app.errors import InvalidInput
from app.services import runs as run_service
from app.services.submission import RunRequest, submit
from app.ui.render import UiRoute
from app.ui.routes import job_editor, scoped_tenant
from app.ui.sessions import FormDep, SessionDep

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)
JobName = Annotated[str, Path(pattern=JOB_NAME_PATTERN)]


def _tenant_of(form: dict[str, str]) -> str | None:
    return form.get("tenant") or None


def _query(tenant: str | None) -> str:
    return f"?tenant={tenant}" if tenant else ""  # a tenant id is [a-z0-9_-]: nothing to encode


@router.post("/runs/{run_id}/cancel")
async def cancel_run(run_id: UUID, state: StateDep, session: SessionDep, form: FormDep) -> Response:
    await run_service.cancel_run(state.pool, run_id, session.principal.tenant_id)
    return RedirectResponse(f"/ui/runs/{run_id}", status_code=303)


@router.post("/runs/{run_id}/retry")
async def retry_run(run_id: UUID, state: StateDep, session: SessionDep, form: FormDep) -> Response:
    """A failed or cancelled run back to pending, due now: what POST /runs/{id}/retry does."""
    await run_service.retry_run(
        state.pool, state.admission, state.on_pending, run_id, session.principal.tenant_id, None
    )
    return RedirectResponse(f"/ui/runs/{run_id}", status_code=303)


@router.post("/jobs/{name}/trigger")
async def trigger_job(
    request: Request, name: JobName, state: StateDep, session: SessionDep, form: FormDep
) -> Response:
    """A run of the job now, with its default payload: what POST /tenants/{id}/runs {"job"} does."""
    tenant_id = scoped_tenant(session, _tenant_of(form))
    [submitted] = await submit(
        state.pool,
        state.admission,
        tenant_id,
        [RunRequest(name, None, None, None, "")],
        request.headers.get("traceparent"),
        state.wakeups,
        state.on_pending,
    )
    return RedirectResponse(f"/ui/runs/{submitted.run['id']}", status_code=303)


@router.post("/jobs/{name}")
async def save_job(
    request: Request, name: JobName, state: StateDep, session: SessionDep, form: FormDep
) -> Response:
    """Validated by the API's own JobPut and saved by the same service as PUT /tenants/{id}/jobs/{name}."""
    tenant = _tenant_of(form)
    tenant_id = scoped_tenant(session, tenant)
    text = form.get("definition", "")
    try:
        await put_job(state, tenant_id, name, JobPut.model_validate_json(text))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
        return job_editor(request, session, tenant_id, tenant, name, text, problems)
    except InvalidInput as exc:
        return job_editor(request, session, tenant_id, tenant, name, text, f"{exc.field}: {exc.message}")
    return RedirectResponse(f"/ui/jobs{_query(tenant)}", status_code=303)
