"""Every operation once, for both clients: which generated endpoint it calls and with what. The
clients only send (`Client` through the endpoints' sync functions, `AsyncClient` through their
async ones) and unwrap the answer."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from scheduler_client.calls import Op, Pages, as_uuid, json_body, new_idempotency_key
from scheduler_client.generated.api.audit import list_audit_events
from scheduler_client.generated.api.events import publish_event
from scheduler_client.generated.api.flow_control import pause_job, resume_job
from scheduler_client.generated.api.groups import get_group, list_groups
from scheduler_client.generated.api.jobs import backfill_job, delete_job, get_job, list_jobs, put_job
from scheduler_client.generated.api.runs import (
    cancel_run,
    get_run,
    list_runs,
    reschedule_run,
    retry_run,
    submit_run,
    submit_run_batch,
)
from scheduler_client.generated.api.tenants import create_key, list_keys, revoke_key, rotate_signing_secret
from scheduler_client.generated.models import (
    ApiKeyList,
    AuditEvent,
    AuditEventList,
    Backfill,
    BackfillResult,
    EventPublish,
    EventRuns,
    Group,
    GroupList,
    Job,
    JobList,
    JobPut,
    KeyCreate,
    KeyCreated,
    KeyCreateScopesItem,
    ListAuditEventsActionType0,
    Run,
    RunBatch,
    RunBatchSubmit,
    RunList,
    RunReschedule,
    RunRetry,
    RunStatus,
    RunSubmit,
    SigningSecretCreated,
    SigningSecretRotation,
)
from scheduler_client.generated.types import UNSET

# A run in one of these has ended: `wait` returns it.
ENDED = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})


# ───────────────────────────── jobs ─────────────────────────────


def put_job_op(tenant: str, name: str, fields: Mapping[str, Any]) -> Op[Job]:
    body = json_body(JobPut, fields)
    return Op(put_job.sync_detailed, put_job.asyncio_detailed, tenant, name, body=body)


def get_job_op(tenant: str, name: str) -> Op[Job]:
    return Op(get_job.sync_detailed, get_job.asyncio_detailed, tenant, name)


def delete_job_op(tenant: str, name: str) -> Op[Any]:
    return Op(delete_job.sync_detailed, delete_job.asyncio_detailed, tenant, name)


def pause_job_op(tenant: str, name: str, paused: bool) -> Op[Job]:
    endpoint = pause_job if paused else resume_job
    return Op(endpoint.sync_detailed, endpoint.asyncio_detailed, tenant, name)


def backfill_job_op(tenant: str, name: str, start: datetime | str, end: datetime | str) -> Op[BackfillResult]:
    body = json_body(Backfill, {"from": start, "to": end})
    return Op(backfill_job.sync_detailed, backfill_job.asyncio_detailed, tenant, name, body=body)


def job_pages(tenant: str, page_size: int | None) -> Pages[JobList, Job]:
    def page(cursor: str | None) -> Op[JobList]:
        return Op(
            list_jobs.sync_detailed,
            list_jobs.asyncio_detailed,
            tenant,
            limit=page_size if page_size is not None else UNSET,
            cursor=cursor if cursor is not None else UNSET,
        )

    return Pages(page, "jobs")


# ───────────────────────────── runs ─────────────────────────────


def submit_run_op(
    tenant: str,
    job: str,
    payload: Any,
    scheduled_at: datetime | str | None,
    idempotency_key: str | None,
    fields: Mapping[str, Any],
) -> Op[Run]:
    """A submission always carries an Idempotency-Key (a new one when the caller gave none): sent
    again after a lost answer, it is answered with the run it made, not a second run."""
    values = {"job": job, **fields}
    if payload is not None:
        values["payload"] = payload
    if scheduled_at is not None:
        values["scheduled_at"] = scheduled_at
    body = json_body(RunSubmit, values)
    key = idempotency_key or new_idempotency_key()
    return Op(submit_run.sync_detailed, submit_run.asyncio_detailed, tenant, body=body, idempotency_key=key)


def submit_batch_op(
    tenant: str, runs: Iterable[Mapping[str, Any]], group: Mapping[str, Any] | None = None
) -> Op[RunBatch]:
    """Each run keyed like a single submission, so a batch sent again makes its runs once. `group`:
    the group the runs go into, a new one ({"name": ..., "on_complete": ...}) or an open one ({"id": ...})."""
    items = [{**run, "idempotency_key": run.get("idempotency_key") or new_idempotency_key()} for run in runs]
    fields: dict[str, Any] = {"runs": items}
    if group is not None:
        fields["group"] = group
    body = json_body(RunBatchSubmit, fields)
    return Op(submit_run_batch.sync_detailed, submit_run_batch.asyncio_detailed, tenant, body=body)


def get_run_op(run_id: uuid.UUID | str) -> Op[Run]:
    return Op(get_run.sync_detailed, get_run.asyncio_detailed, as_uuid(run_id))


def cancel_run_op(run_id: uuid.UUID | str) -> Op[Run]:
    return Op(cancel_run.sync_detailed, cancel_run.asyncio_detailed, as_uuid(run_id))


def retry_run_op(run_id: uuid.UUID | str, max_attempts: int | None) -> Op[Run]:
    body = RunRetry(max_attempts=max_attempts) if max_attempts is not None else UNSET
    return Op(retry_run.sync_detailed, retry_run.asyncio_detailed, as_uuid(run_id), body=body)


def reschedule_run_op(run_id: uuid.UUID | str, due_at: datetime | str) -> Op[Run]:
    body = json_body(RunReschedule, {"due_at": due_at})
    return Op(reschedule_run.sync_detailed, reschedule_run.asyncio_detailed, as_uuid(run_id), body=body)


def run_pages(tenant: str, filters: Mapping[str, Any]) -> Pages[RunList, Run]:
    """`filters`: list_runs' query parameters (status, job, scheduled_after, scheduled_before, tag,
    group) and `limit`, the page size."""

    def page(cursor: str | None) -> Op[RunList]:
        return Op(
            list_runs.sync_detailed,
            list_runs.asyncio_detailed,
            tenant,
            **filters,
            cursor=cursor if cursor is not None else UNSET,
        )

    return Pages(page, "runs")


# ───────────────────────────── groups and events ─────────────────────────────


def get_group_op(tenant: str, group_id: uuid.UUID | str) -> Op[Group]:
    return Op(get_group.sync_detailed, get_group.asyncio_detailed, tenant, as_uuid(group_id))


def group_pages(tenant: str, page_size: int | None) -> Pages[GroupList, Group]:
    def page(cursor: str | None) -> Op[GroupList]:
        return Op(
            list_groups.sync_detailed,
            list_groups.asyncio_detailed,
            tenant,
            limit=page_size if page_size is not None else UNSET,
            cursor=cursor if cursor is not None else UNSET,
        )

    return Pages(page, "groups")


def publish_event_op(tenant: str, name: str, payload: Any, idempotency_key: str | None) -> Op[EventRuns]:
    """A run of every job subscribed to the event. Keyed like a submission (a new key when the
    caller gave none): sent again after a lost answer, it is answered with the runs it made."""
    body = json_body(EventPublish, {"payload": payload} if payload is not None else {})
    key = idempotency_key or new_idempotency_key()
    return Op(
        publish_event.sync_detailed,
        publish_event.asyncio_detailed,
        tenant,
        name,
        body=body,
        idempotency_key=key,
    )


# ───────────────────────────── keys and secrets ─────────────────────────────


def list_keys_op(tenant: str) -> Op[ApiKeyList]:
    return Op(list_keys.sync_detailed, list_keys.asyncio_detailed, tenant)


def create_key_op(tenant: str, scopes: Sequence[str] | None = None) -> Op[KeyCreated]:
    """A key with `scopes` (runs:read, runs:write, jobs:read, jobs:write, tenant:admin; None: all)."""
    # None sends no body (the generated call's default, UNSET, is not JSON): every scope.
    body = KeyCreate(scopes=[KeyCreateScopesItem(s) for s in scopes]) if scopes is not None else None
    return Op(create_key.sync_detailed, create_key.asyncio_detailed, tenant, body=body)


def revoke_key_op(tenant: str, key_id: uuid.UUID | str) -> Op[Any]:
    return Op(revoke_key.sync_detailed, revoke_key.asyncio_detailed, tenant, as_uuid(key_id))


def rotate_signing_secret_op(tenant: str, overlap_seconds: int | None) -> Op[SigningSecretCreated]:
    body = SigningSecretRotation(overlap_seconds=overlap_seconds) if overlap_seconds is not None else None
    return Op(rotate_signing_secret.sync_detailed, rotate_signing_secret.asyncio_detailed, tenant, body=body)


def audit_pages(tenant: str, action: str | None, limit: int | None) -> Pages[AuditEventList, AuditEvent]:
    """The tenant's audit log, newest first: every event, or one `action`'s; `limit`: the page size."""

    def page(cursor: str | None) -> Op[AuditEventList]:
        return Op(
            list_audit_events.sync_detailed,
            list_audit_events.asyncio_detailed,
            tenant,
            action=ListAuditEventsActionType0(action) if action is not None else UNSET,
            limit=limit if limit is not None else UNSET,
            cursor=cursor if cursor is not None else UNSET,
        )

    return Pages(page, "events")
