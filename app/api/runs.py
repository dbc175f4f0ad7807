"""Runs: submit one or a batch, read, list, cancel, retry, reschedule."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import Body, Header, Path, Query, Request, Response

from app.api.cursors import decode_cursor, encode_cursor
from app.api.deps import AuditDep, PrincipalDep, StateDep
from app.api.large_bodies import PARSER, LargeBodiesOffTheLoop, is_large
from app.api.routers import api_router
from app.api.schemas.common import (
    JOB_NAME_PATTERN,
    TAGS_RULE,
    TENANT_ID_PATTERN,
    Tag,
    error_responses,
    json_response,
)
from app.api.schemas.runs import (
    IdempotencyKey,
    Run,
    RunBatch,
    RunBatchSubmit,
    RunList,
    RunReschedule,
    RunRetry,
    RunStatusName,
    RunSubmit,
)
from app.domain import MAX_TAGS, RunStatus
from app.errors import InvalidInput
from app.services import runs as run_service
from app.services.dependencies import Dependencies
from app.services.run_requests import RunRequest, Submission
from app.services.validation import Moment

router = api_router(tags=["runs"])
submissions = api_router(route_class=LargeBodiesOffTheLoop)  # tagged "runs" by `router`
ERRORS = error_responses(401, 403, 404, 409, 413, 422, 429)
# A tenant id that cannot exist is refused before any query (a NUL in it was a 500 in Postgres).
TenantIdPath = Annotated[str, Path(pattern=TENANT_ID_PATTERN)]


def _run(body: RunSubmit) -> RunRequest:
    """The run as sent; the Submitter checks it."""
    return RunRequest(
        body.job,
        body.scheduled_at,
        body.payload,
        body.idempotency_key,
        priority=body.priority,
        callback=None if body.callback is None else body.callback.model_dump(),
        expires_at=body.expires_at,
        tags=body.tags,
        metadata=body.metadata,
        dependencies=Dependencies(
            body.ref, tuple(body.depends_on or ()), body.on_parent_failure, body.pass_results
        ),
    )


@submissions.post(
    "/tenants/{tenant_id}/runs",
    status_code=201,
    response_model=Run,
    responses=error_responses(401, 403, 404, 409, 413, 422, 429, success={200: Run}),
)
async def submit_run(
    tenant_id: TenantIdPath,
    body: RunSubmit,
    request: Request,
    state: StateDep,
    principal: PrincipalDep,
    idempotency_key: Annotated[IdempotencyKey | None, Header(alias="Idempotency-Key")] = None,
) -> Response:
    """Submit one run of a job. A repeated idempotency key with the same body answers 200 with the
    same run; with another body, 422; while a request with that key is still in flight, 409. A
    duplicate of a `unique` job's run, or a submission folded into a `debounce` job's pending run,
    answers 200 with that run."""
    principal.require_tenant(tenant_id)
    submission = Submission(
        tenant_id,
        [_run(body)],
        group=None if body.group is None else body.group.model_dump(),
        idempotency_key=idempotency_key,
        traceparent=request.headers.get("traceparent"),
    )
    [result] = (await state.submitter.submit(submission)).runs
    return json_response(result.run, 201 if result.created else 200)


@submissions.post(
    "/tenants/{tenant_id}/runs/batch",
    status_code=201,
    response_model=RunBatch,
    responses=ERRORS,
    name="submit_run_batch",
)
async def submit_batch(
    tenant_id: TenantIdPath, body: RunBatchSubmit, request: Request, state: StateDep, principal: PrincipalDep
) -> Response:
    """Submit up to SCHEDULER_MAX_BATCH runs, validated all-or-nothing: one bad item writes nothing.
    `created` says which items made a new run and which were answered with one that exists."""
    principal.require_tenant(tenant_id)
    for i, run in enumerate(body.runs):  # an item's schema is a single run's, which may name a group
        if run.group is not None:
            raise InvalidInput(
                "a batch names its group beside its runs, not in one", field=f"runs[{i}].group"
            )
    submission = Submission(
        tenant_id,
        [_run(run) for run in body.runs],
        batch=True,
        group=None if body.group is None else body.group.model_dump(),
        traceparent=request.headers.get("traceparent"),
    )
    # A large body's checks run on its parser's thread (app.api.large_bodies).
    answer = await state.submitter.submit(submission, executor=PARSER if is_large(request) else None)
    body_out: dict[str, Any] = {
        "runs": [s.run for s in answer.runs],
        "created": [s.created for s in answer.runs],
    }
    if body.group is not None:
        body_out["group_id"] = answer.group_id
    return json_response(body_out, 201)


@router.get("/runs/{run_id}", response_model=Run, responses=ERRORS)
async def get_run(run_id: UUID, state: StateDep, principal: PrincipalDep) -> Response:
    """Read one run. The id names its day, so this touches one partition."""
    return json_response(await run_service.get_run(state.pool, run_id, principal.tenant_id))


@router.get("/tenants/{tenant_id}/runs", response_model=RunList, responses=ERRORS)
async def list_runs(
    tenant_id: TenantIdPath,
    state: StateDep,
    principal: PrincipalDep,
    status: RunStatusName | None = None,
    job: Annotated[str | None, Query(pattern=JOB_NAME_PATTERN)] = None,
    scheduled_after: Annotated[Moment | None, Query(description="scheduled_at >= this.")] = None,
    scheduled_before: Annotated[Moment | None, Query(description="scheduled_at < this.")] = None,
    tag: Annotated[
        list[Tag] | None,
        Query(max_length=MAX_TAGS, description=f"Runs carrying every tag given (repeat it). {TAGS_RULE}"),
    ] = None,
    group: Annotated[UUID | None, Query(description="Only the runs of this group.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    cursor: Annotated[str | None, Query(max_length=256)] = None,
) -> Response:
    """A tenant's runs, newest scheduled first, keyset-paginated: pass next_cursor back as cursor."""
    principal.require_tenant(tenant_id)
    runs = await run_service.list_runs(
        state.pool,
        tenant_id,
        status=RunStatus(status) if status is not None else None,
        job=job,
        scheduled_after=scheduled_after,
        scheduled_before=scheduled_before,
        tags=list(dict.fromkeys(tag)) if tag else None,
        after=decode_cursor(cursor) if cursor else None,
        limit=limit,
        group=group,
    )
    last = runs[-1] if len(runs) == limit else None
    return json_response(
        {"runs": runs, "next_cursor": encode_cursor(last["scheduled_at"], last["id"]) if last else None}
    )


@router.post("/runs/{run_id}/cancel", response_model=Run, responses=ERRORS)
async def cancel_run(run_id: UUID, state: StateDep, principal: PrincipalDep, audit: AuditDep) -> Response:
    """Cancel a run that has not ended: pending, dispatched or running. It is `cancelled` when this
    answers. A running run's attempt ends `cancelled` in its history, with no retry; the worker
    executing it is told to stop (within seconds: a webhook's request is aborted, a python handler's
    task cancelled), and whatever that attempt still brings back changes nothing. A finished run is
    409."""
    return json_response(
        await run_service.cancel_run(state.pool, run_id, principal.tenant_id, state.stop_running, audit=audit)
    )


@router.post("/runs/{run_id}/retry", response_model=Run, responses=ERRORS)
async def retry_run(
    run_id: UUID,
    state: StateDep,
    principal: PrincipalDep,
    audit: AuditDep,
    body: Annotated[RunRetry | None, Body()] = None,
) -> Response:
    """Move a failed or cancelled run back to pending, due now, under a new epoch (a worker still
    finishing an old attempt has its outcome discarded). Its attempt count and last_error stay.
    Another status, or a run that made 100 attempts (the most a run may make), is 409; a tenant over
    its backlog quota, 429."""
    return json_response(
        await run_service.retry_run(
            state.pool,
            state.admission,
            run_id,
            principal.tenant_id,
            body.max_attempts if body is not None else None,
            audit=audit,
        )
    )


@router.post("/runs/{run_id}/reschedule", response_model=Run, responses=ERRORS)
async def reschedule_run(
    run_id: UUID, body: RunReschedule, state: StateDep, principal: PrincipalDep, audit: AuditDep
) -> Response:
    """Move a pending run's due time earlier (a past time means now) or later. It keeps its id and
    scheduled_at; a run moved before its scheduled_at is still claimed when due (docs/api.md: "Retry,
    reschedule, bulk actions"). Another status is 409."""
    return json_response(
        await run_service.reschedule_run(
            state.pool,
            run_id,
            principal.tenant_id,
            body.due_at,
            state.settings.max_schedule_ahead_days,
            audit=audit,
        )
    )


router.include_router(submissions)
