"""Client: the API from synchronous code (httpx.Client underneath)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import httpx

from scheduler_client import calls
from scheduler_client import operations as ops
from scheduler_client.errors import ApiError
from scheduler_client.generated.models import (
    ApiKey,
    AuditEvent,
    BackfillResult,
    Group,
    Job,
    KeyCreated,
    Problem,
    Run,
    SigningSecretCreated,
)
from scheduler_client.generated.types import Response
from scheduler_client.retries import RetryingTransport, RetryPolicy
from scheduler_client.waiting import Waiting

T = TypeVar("T")


def _raise_problem(response: httpx.Response) -> None:
    if not response.is_success:
        response.read()
        raise ApiError.from_response(response)


class Client:
    """`Client(base_url, api_key)`; use it in a `with` block or `close()` it. Every method raises
    ApiError for the API's problems and retries 429, 503 and connection failures per `retries`.
    `transport` replaces httpx's own (a proxy, TLS settings); retries wrap it."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        retries: RetryPolicy = RetryPolicy(),  # noqa: B008 (frozen: one instance is safe to share)
        transport: httpx.BaseTransport | None = None,
    ):
        retrying = RetryingTransport(retries, transport)
        self._api = calls.api_client(base_url, api_key, timeout, retrying, _raise_problem)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._api.get_httpx_client().close()

    def _send(self, op: calls.Op[T]) -> Response[T | Problem]:
        """The endpoint's whole answer (schedctl prints its JSON as it came)."""
        return op.sync(*op.args, client=self._api, **op.kwargs)

    def _do(self, op: calls.Op[T]) -> T:
        return op.result(self._send(op))

    def _each(self, pages: calls.Pages[Any, T]) -> Iterator[T]:
        cursor: str | None = None
        while True:
            page = self._do(pages.page(cursor))
            yield from pages.items(page)
            if (cursor := pages.next_cursor(page)) is None:
                return

    # Jobs

    def put_job(self, tenant: str, name: str, **fields: Any) -> Job:
        """Create or replace the job; `fields` are the job's (target=..., schedule=..., ...)."""
        return self._do(ops.put_job_op(tenant, name, fields))

    def get_job(self, tenant: str, name: str) -> Job:
        return self._do(ops.get_job_op(tenant, name))

    def list_jobs(self, tenant: str, *, page_size: int | None = None) -> Iterator[Job]:
        """Every job of the tenant, by name, page after page."""
        return self._each(ops.job_pages(tenant, page_size))

    def delete_job(self, tenant: str, name: str) -> None:
        self._do(ops.delete_job_op(tenant, name))

    def pause_job(self, tenant: str, name: str) -> Job:
        return self._do(ops.pause_job_op(tenant, name, True))

    def resume_job(self, tenant: str, name: str) -> Job:
        return self._do(ops.pause_job_op(tenant, name, False))

    def trigger_job(
        self, tenant: str, name: str, payload: Any = None, *, idempotency_key: str | None = None
    ) -> Run:
        """A run of the job now (with the job's payload unless given one)."""
        return self.submit_run(tenant, name, payload, idempotency_key=idempotency_key)

    def backfill_job(
        self, tenant: str, name: str, start: datetime | str, end: datetime | str
    ) -> BackfillResult:
        """Runs for the cron job's occurrences in [start, end), each made at most once however
        often asked (`existing` counts those made already)."""
        return self._do(ops.backfill_job_op(tenant, name, start, end))

    # Runs

    def submit_run(
        self,
        tenant: str,
        job: str,
        payload: Any = None,
        *,
        scheduled_at: datetime | str | None = None,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Run:
        """A run of `job` (now unless `scheduled_at`); `fields`: the run's others (priority,
        callback, depends_on=[run ids], on_parent_failure, pass_results, group={"id": ...}).
        Retried with the same Idempotency-Key (a new one when not given), so it makes one run."""
        return self._do(ops.submit_run_op(tenant, job, payload, scheduled_at, idempotency_key, fields))

    def submit_batch(
        self, tenant: str, runs: Iterable[Mapping[str, Any]], *, group: Mapping[str, Any] | None = None
    ) -> list[Run]:
        """Up to the API's batch limit of runs ({"job": ..., "payload": ..., "ref": ...,
        "depends_on": [earlier refs or run ids], ...}), all or none; into `group`, a new one
        ({"name": ..., "on_complete": ...}) or an open one ({"id": ...}): each run's `group_id`."""
        return self._do(ops.submit_batch_op(tenant, runs, group)).runs

    def get_run(self, run_id: uuid.UUID | str) -> Run:
        return self._do(ops.get_run_op(run_id))

    def wait(self, run_id: uuid.UUID | str, timeout: float = 60.0) -> Run:
        """The run once it has ended (succeeded, failed or cancelled); TimeoutError after `timeout`."""
        waiting = Waiting(run_id, timeout)
        while (run := self.get_run(run_id)).status not in ops.ENDED:
            time.sleep(waiting.pause(run))
        return run

    def list_runs(self, tenant: str, **filters: Any) -> Iterator[Run]:
        """Every run matching `filters` (status, job, scheduled_after, scheduled_before; limit: the
        page size), newest scheduled first, page after page."""
        return self._each(ops.run_pages(tenant, filters))

    def cancel_run(self, run_id: uuid.UUID | str) -> Run:
        return self._do(ops.cancel_run_op(run_id))

    def retry_run(self, run_id: uuid.UUID | str, *, max_attempts: int | None = None) -> Run:
        return self._do(ops.retry_run_op(run_id, max_attempts))

    def reschedule_run(self, run_id: uuid.UUID | str, due_at: datetime | str) -> Run:
        return self._do(ops.reschedule_run_op(run_id, due_at))

    # Groups and events

    def get_group(self, tenant: str, group_id: uuid.UUID | str) -> Group:
        """The group's progress: its runs counted by status, when it completed and what that made."""
        return self._do(ops.get_group_op(tenant, group_id))

    def list_groups(self, tenant: str, *, page_size: int | None = None) -> Iterator[Group]:
        """Every group of the tenant, newest first, page after page."""
        return self._each(ops.group_pages(tenant, page_size))

    def publish_event(
        self, tenant: str, name: str, payload: Any = None, *, idempotency_key: str | None = None
    ) -> list[Run]:
        """One run of every job subscribed to the event `name` (its `on_events`), all or none, in
        job name order (none: no job subscribes), each with `payload` (default: its job's).
        Retried with the same Idempotency-Key (a new one when not given), so it makes them once."""
        return self._do(ops.publish_event_op(tenant, name, payload, idempotency_key)).runs

    # The audit log

    def list_audit_events(
        self, tenant: str, *, action: str | None = None, page_size: int | None = None
    ) -> Iterator[AuditEvent]:
        """Every change made to the tenant through the API or the dashboard (one `action` only, if
        given), newest first, page after page (docs/audit.md)."""
        return self._each(ops.audit_pages(tenant, action, page_size))

    # Keys and signing secrets

    def list_keys(self, tenant: str) -> list[ApiKey]:
        return self._do(ops.list_keys_op(tenant)).keys

    def create_key(self, tenant: str, scopes: Sequence[str] | None = None) -> KeyCreated:
        """Another key, holding `scopes` (default: every scope, as the issuing key may give)."""
        return self._do(ops.create_key_op(tenant, scopes))

    def revoke_key(self, tenant: str, key_id: uuid.UUID | str) -> None:
        self._do(ops.revoke_key_op(tenant, key_id))

    def rotate_signing_secret(
        self, tenant: str, *, overlap_seconds: int | None = None
    ) -> SigningSecretCreated:
        return self._do(ops.rotate_signing_secret_op(tenant, overlap_seconds))
