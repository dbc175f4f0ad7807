"""Runs: submit one or a batch, read, list, cancel, retry, reschedule."""

from __future__ import annotations

import asyncio
import functools
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Body, Header, Path, Query, Request, Response

from app.api.cursors import decode_cursor, encode_cursor
from app.api.deps import AuditDep, PrincipalDep, State, StateDep
from app.api.large_bodies import PARSER, LargeBodiesOffTheLoop, is_large
from app.api.schemas.common import (
    JOB_NAME_PATTERN,
    TAGS_RULE,
    TENANT_ID_PATTERN,
    Tag,
    error_responses,
    json_response,
)
from app.api.schemas.groups import GroupRef, GroupSpec
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
from app.config import Settings
from app.domain import MAX_TAGS, RunStatus
from app.errors import InvalidInput
from app.services import groups as group_service
from app.services import runs as run_service
from app.services.callbacks import validate_callback
from app.services.dependencies import Dependencies
from app.services.groups import GroupPlan
from app.services.run_requests import RunRequest, Submitted
from app.services.submission import submit
from app.services.validation import Moment, check_metadata, check_payload, check_schedule_window

router = APIRouter(tags=["runs"])
submissions = APIRouter(route_class=LargeBodiesOffTheLoop)  # tagged "runs" by `router`
ERRORS = error_responses(401, 403, 404, 409, 413, 422, 429)
# A tenant id that cannot exist is refused before any query (a NUL in it was a 500 in Postgres).
TenantIdPath = Annotated[str, Path(pattern=TENANT_ID_PATTERN)]


def _check(settings: Settings, body: RunSubmit, field: str, header_key: str | None = None) -> str | None:
    """A run's input checks but its callback's (which may resolve its host); its idempotency key."""
    if body.payload is not None:
        check_payload(
            body.payload,
            settings.max_payload_bytes,
            max_depth=settings.max_payload_depth,
            field=f"{field}payload",
        )
    if body.metadata is not None:
        check_metadata(body.metadata, max_depth=settings.max_payload_depth, field=f"{field}metadata")
    if body.scheduled_at is not None:
        check_schedule_window(
            body.scheduled_at,
            ahead_days=settings.max_schedule_ahead_days,
            behind_days=settings.max_schedule_behind_days,
            field=f"{field}scheduled_at",
        )
    if field and body.group is not None:
        raise InvalidInput("a batch names its group beside its runs, not in one", field=f"{field}group")
    key = body.idempotency_key
    if header_key is not None and key is not None and key != header_key:
        raise InvalidInput("Idempotency-Key header and body idempotency_key differ", field="idempotency_key")
    return key if header_key is None else header_key


def _check_all(settings: Settings, runs: list[RunSubmit]) -> None:
    for i, run in enumerate(runs):
        _check(settings, run, f"runs[{i}].")


async def _request(
    state: State, body: RunSubmit, field: str, header_key: str | None = None, *, checked: bool = False
) -> RunRequest:
    """The run's request, its input checked (`checked`: all but its callback already were)."""
    key = body.idempotency_key if checked else _check(state.settings, body, field, header_key)
    callback = None
    if body.callback is not None:
        callback = await validate_callback(
            body.callback.model_dump(),
            field=f"{field}callback",
            allow_private=state.settings.allow_private_targets,
        )
    return RunRequest(
        body.job,
        body.scheduled_at,
        body.payload,
        key,
        field,
        body.priority,
        callback,
        body.expires_at,
        body.tags,
        body.metadata,
        Dependencies(body.ref, tuple(body.depends_on or ()), body.on_parent_failure, body.pass_results),
    )


async def _group(state: State, tenant_id: str, spec: GroupSpec | GroupRef | None) -> GroupPlan | None:
    if spec is None:
        return None
    s = state.settings
    return await group_service.plan(
        state.pool,
        tenant_id,
        spec.model_dump(),
        group_service.Limits(s.allow_private_targets, s.max_payload_bytes, s.max_payload_depth),
        may_create=isinstance(spec, GroupSpec),
    )


async def _submit(
    state: State, request: Request, tenant_id: str, requests: list[RunRequest], group: GroupPlan | None = None
) -> list[Submitted]:
    return await submit(
        state.pool,
        state.admission,
        tenant_id,
        requests,
        request.headers.get("traceparent"),
        state.wakeups,
        group,
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
    run = await _request(state, body, "", idempotency_key)
    [result] = await _submit(state, request, tenant_id, [run], await _group(state, tenant_id, body.group))
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
    if len(body.runs) > state.settings.max_batch:
        raise InvalidInput(f"at most {state.settings.max_batch} runs per batch", field="runs")
    # The checks walk every payload (a second for 16 MiB of small values): in a thread, not on the
    # event loop, which the engine shares.
    settings = state.settings
    checks = functools.partial(_check_all, settings, body.runs)
    if is_large(request):
        await asyncio.get_running_loop().run_in_executor(PARSER, checks)
    else:
        await asyncio.to_thread(checks)
    requests = [await _request(state, r, f"runs[{i}].", checked=True) for i, r in enumerate(body.runs)]
    group = await _group(state, tenant_id, body.group)
    submitted = await _submit(state, request, tenant_id, requests, group)
    answer: dict[str, Any] = {"runs": [s.run for s in submitted], "created": [s.created for s in submitted]}
    if group is not None:
        # A replay that created nothing made no group: it is answered with the one its runs joined.
        joined = [s.run["group_id"] for s in submitted if s.deduplicated_by is None and s.run["group_id"]]
        answer["group_id"] = group.id if any(s.created for s in submitted) else next(iter(joined), None)
    return json_response(answer, 201)


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
