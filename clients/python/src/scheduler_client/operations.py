"""Every operation once, for both clients: which generated endpoint it calls and with what. The
clients only send (`Client` through the endpoints' sync functions, `AsyncClient` through their
async ones) and unwrap the answer."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, cast

import httpx

from scheduler_client.errors import ApiError
from scheduler_client.generated import AuthenticatedClient
from scheduler_client.generated.api.audit import list_audit_events
from scheduler_client.generated.api.flow_control import pause_job, resume_job
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
    Job,
    JobList,
    JobPut,
    KeyCreate,
    KeyCreated,
    KeyCreateScopesItem,
    ListAuditEventsActionType0,
    Problem,
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
from scheduler_client.generated.types import UNSET, Response


class _Page(Protocol):
    @property
    def next_cursor(self) -> str | None: ...


T = TypeVar("T")
P = TypeVar("P", bound=_Page)
M = TypeVar("M")

USER_AGENT = "scheduler-client (python)"
# A run in one of these has ended: `wait` returns it.
ENDED = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})


def api_client(
    base_url: str, api_key: str, timeout: float, transport: Any, raise_problem: Callable[..., Any]
) -> AuthenticatedClient:
    """The generated client that both clients send through: the key, a timeout per attempt, the
    retrying `transport` beneath, and `raise_problem`, the response hook that turns every answer
    but a success into ApiError (before the generated code parses it)."""
    return AuthenticatedClient(
        base_url=base_url.rstrip("/"),
        token=api_key,
        timeout=httpx.Timeout(timeout),
        headers={"User-Agent": USER_AGENT},
        httpx_args={"transport": transport, "event_hooks": {"response": [raise_problem]}},
    )


class Op(Generic[T]):
    """One call of a generated endpoint: its sync and async functions and their arguments."""

    def __init__(
        self,
        sync: Callable[..., Response[T | Problem]],
        asyncio: Callable[..., Awaitable[Response[T | Problem]]],
        *args: Any,
        **kwargs: Any,
    ):
        self.sync = sync
        self.asyncio = asyncio
        self.args = args
        self.kwargs = kwargs

    def result(self, response: Response[T | Problem]) -> T:
        """The answer's model. Errors never get here (the clients' response hook raises ApiError
        for them); a success the contract does not name (a 202, say) does not pass either."""
        parsed = response.parsed
        if response.status_code == 204:
            return cast(T, None)
        if parsed is None or isinstance(parsed, Problem):
            raise ApiError(
                int(response.status_code), "http_error", f"unexpected answer {response.status_code}"
            )
        return parsed


@dataclass(frozen=True)
class Pages(Generic[P, T]):
    """A listing: `page(cursor)` reads the page after `cursor` (None: the first); a page's items
    are its member `field` ("runs", "jobs"), and its `next_cursor` where the next page starts
    (None: it was the last)."""

    page: Callable[[str | None], Op[P]]
    field: str

    def items(self, page: P) -> Sequence[T]:
        return cast(Sequence[T], getattr(page, self.field))

    @staticmethod
    def next_cursor(page: P) -> str | None:
        return page.next_cursor


def _plain(value: Any) -> Any:
    """A value as JSON carries it: a model as its dict, a datetime in ISO 8601, a UUID as text."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


class _Json(dict[str, Any]):
    """A request body as the caller gave it, for the generated endpoints, which send
    `body.to_dict()`. The API is the one validator (its 422 names the field at fault): the
    generated request models would drop a field they do not know without a word (a typo, or a
    field newer than this client), and fail on a nested one missing with a misleading name."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self)


def _body(model: type[M], fields: Mapping[str, Any]) -> M:
    """`fields` as the body the endpoint takes (`model`, for its type)."""
    return cast(M, _Json(_plain(fields)))


def _uuid(value: uuid.UUID | str) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


def new_idempotency_key() -> str:
    return str(uuid.uuid4())


# ───────────────────────────── jobs ─────────────────────────────


def put_job_op(tenant: str, name: str, fields: Mapping[str, Any]) -> Op[Job]:
    body = _body(JobPut, fields)
    return Op(put_job.sync_detailed, put_job.asyncio_detailed, tenant, name, body=body)


def get_job_op(tenant: str, name: str) -> Op[Job]:
    return Op(get_job.sync_detailed, get_job.asyncio_detailed, tenant, name)


def delete_job_op(tenant: str, name: str) -> Op[Any]:
    return Op(delete_job.sync_detailed, delete_job.asyncio_detailed, tenant, name)


def pause_job_op(tenant: str, name: str, paused: bool) -> Op[Job]:
    endpoint = pause_job if paused else resume_job
    return Op(endpoint.sync_detailed, endpoint.asyncio_detailed, tenant, name)


def backfill_job_op(tenant: str, name: str, start: datetime | str, end: datetime | str) -> Op[BackfillResult]:
    body = _body(Backfill, {"from": start, "to": end})
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
    body = _body(RunSubmit, values)
    key = idempotency_key or new_idempotency_key()
    return Op(submit_run.sync_detailed, submit_run.asyncio_detailed, tenant, body=body, idempotency_key=key)


def submit_batch_op(tenant: str, runs: Iterable[Mapping[str, Any]]) -> Op[RunBatch]:
    """Each run keyed like a single submission, so a batch sent again makes its runs once."""
    items = [{**run, "idempotency_key": run.get("idempotency_key") or new_idempotency_key()} for run in runs]
    body = _body(RunBatchSubmit, {"runs": items})
    return Op(submit_run_batch.sync_detailed, submit_run_batch.asyncio_detailed, tenant, body=body)


def get_run_op(run_id: uuid.UUID | str) -> Op[Run]:
    return Op(get_run.sync_detailed, get_run.asyncio_detailed, _uuid(run_id))


def cancel_run_op(run_id: uuid.UUID | str) -> Op[Run]:
    return Op(cancel_run.sync_detailed, cancel_run.asyncio_detailed, _uuid(run_id))


def retry_run_op(run_id: uuid.UUID | str, max_attempts: int | None) -> Op[Run]:
    body = RunRetry(max_attempts=max_attempts) if max_attempts is not None else UNSET
    return Op(retry_run.sync_detailed, retry_run.asyncio_detailed, _uuid(run_id), body=body)


def reschedule_run_op(run_id: uuid.UUID | str, due_at: datetime | str) -> Op[Run]:
    body = _body(RunReschedule, {"due_at": due_at})
    return Op(reschedule_run.sync_detailed, reschedule_run.asyncio_detailed, _uuid(run_id), body=body)


def run_pages(tenant: str, filters: Mapping[str, Any]) -> Pages[RunList, Run]:
    """`filters`: list_runs' query parameters (status, job, scheduled_after, scheduled_before) and
    `limit`, the page size."""

    def page(cursor: str | None) -> Op[RunList]:
        return Op(
            list_runs.sync_detailed,
            list_runs.asyncio_detailed,
            tenant,
            **filters,
            cursor=cursor if cursor is not None else UNSET,
        )

    return Pages(page, "runs")


# ───────────────────────────── keys and secrets ─────────────────────────────


def list_keys_op(tenant: str) -> Op[ApiKeyList]:
    return Op(list_keys.sync_detailed, list_keys.asyncio_detailed, tenant)


def create_key_op(tenant: str, scopes: Sequence[str] | None = None) -> Op[KeyCreated]:
    """A key with `scopes` (runs:read, runs:write, jobs:read, jobs:write, tenant:admin; None: all)."""
    # None sends no body (the generated call's default, UNSET, is not JSON): every scope.
    body = KeyCreate(scopes=[KeyCreateScopesItem(s) for s in scopes]) if scopes is not None else None
    return Op(create_key.sync_detailed, create_key.asyncio_detailed, tenant, body=body)


def revoke_key_op(tenant: str, key_id: uuid.UUID | str) -> Op[Any]:
    return Op(revoke_key.sync_detailed, revoke_key.asyncio_detailed, tenant, _uuid(key_id))


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
