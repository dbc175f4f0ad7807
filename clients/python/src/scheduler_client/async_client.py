"""AsyncClient: Client's methods for asyncio code, awaited (httpx.AsyncClient underneath). Each
method is the same operation (scheduler_client.operations) sent through the endpoint's async
function; listings are async iterators (`async for run in client.list_runs(...)`)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
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
    Run,
    SigningSecretCreated,
)
from scheduler_client.retries import AsyncRetryingTransport, RetryPolicy
from scheduler_client.waiting import Waiting

T = TypeVar("T")


async def _raise_problem(response: httpx.Response) -> None:
    if not response.is_success:
        await response.aread()
        raise ApiError.from_response(response)


class AsyncClient:
    """`AsyncClient(base_url, api_key)`; use it in an `async with` block or `await aclose()`."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        retries: RetryPolicy = RetryPolicy(),  # noqa: B008 (frozen: one instance is safe to share)
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        retrying = AsyncRetryingTransport(retries, transport)
        self._api = calls.api_client(base_url, api_key, timeout, retrying, _raise_problem)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._api.get_async_httpx_client().aclose()

    async def _do(self, op: calls.Op[T]) -> T:
        return op.result(await op.asyncio(*op.args, client=self._api, **op.kwargs))

    async def _each(self, pages: calls.Pages[Any, T]) -> AsyncIterator[T]:
        cursor: str | None = None
        while True:
            page = await self._do(pages.page(cursor))
            for item in pages.items(page):
                yield item
            if (cursor := pages.next_cursor(page)) is None:
                return

    # Jobs

    async def put_job(self, tenant: str, name: str, **fields: Any) -> Job:
        return await self._do(ops.put_job_op(tenant, name, fields))

    async def get_job(self, tenant: str, name: str) -> Job:
        return await self._do(ops.get_job_op(tenant, name))

    def list_jobs(self, tenant: str, *, page_size: int | None = None) -> AsyncIterator[Job]:
        return self._each(ops.job_pages(tenant, page_size))

    async def delete_job(self, tenant: str, name: str) -> None:
        await self._do(ops.delete_job_op(tenant, name))

    async def pause_job(self, tenant: str, name: str) -> Job:
        return await self._do(ops.pause_job_op(tenant, name, True))

    async def resume_job(self, tenant: str, name: str) -> Job:
        return await self._do(ops.pause_job_op(tenant, name, False))

    async def trigger_job(
        self, tenant: str, name: str, payload: Any = None, *, idempotency_key: str | None = None
    ) -> Run:
        return await self.submit_run(tenant, name, payload, idempotency_key=idempotency_key)

    async def backfill_job(
        self, tenant: str, name: str, start: datetime | str, end: datetime | str
    ) -> BackfillResult:
        return await self._do(ops.backfill_job_op(tenant, name, start, end))

    # Runs

    async def submit_run(
        self,
        tenant: str,
        job: str,
        payload: Any = None,
        *,
        scheduled_at: datetime | str | None = None,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Run:
        return await self._do(ops.submit_run_op(tenant, job, payload, scheduled_at, idempotency_key, fields))

    async def submit_batch(
        self, tenant: str, runs: Iterable[Mapping[str, Any]], *, group: Mapping[str, Any] | None = None
    ) -> list[Run]:
        return (await self._do(ops.submit_batch_op(tenant, runs, group))).runs

    async def get_run(self, run_id: uuid.UUID | str) -> Run:
        return await self._do(ops.get_run_op(run_id))

    async def wait(self, run_id: uuid.UUID | str, timeout: float = 60.0) -> Run:
        waiting = Waiting(run_id, timeout)
        while (run := await self.get_run(run_id)).status not in ops.ENDED:
            await asyncio.sleep(waiting.pause(run))
        return run

    def list_runs(self, tenant: str, **filters: Any) -> AsyncIterator[Run]:
        return self._each(ops.run_pages(tenant, filters))

    async def cancel_run(self, run_id: uuid.UUID | str) -> Run:
        return await self._do(ops.cancel_run_op(run_id))

    async def retry_run(self, run_id: uuid.UUID | str, *, max_attempts: int | None = None) -> Run:
        return await self._do(ops.retry_run_op(run_id, max_attempts))

    async def reschedule_run(self, run_id: uuid.UUID | str, due_at: datetime | str) -> Run:
        return await self._do(ops.reschedule_run_op(run_id, due_at))

    # Groups and events

    async def get_group(self, tenant: str, group_id: uuid.UUID | str) -> Group:
        return await self._do(ops.get_group_op(tenant, group_id))

    def list_groups(self, tenant: str, *, page_size: int | None = None) -> AsyncIterator[Group]:
        return self._each(ops.group_pages(tenant, page_size))

    async def publish_event(
        self, tenant: str, name: str, payload: Any = None, *, idempotency_key: str | None = None
    ) -> list[Run]:
        return (await self._do(ops.publish_event_op(tenant, name, payload, idempotency_key))).runs

    # The audit log

    def list_audit_events(
        self, tenant: str, *, action: str | None = None, page_size: int | None = None
    ) -> AsyncIterator[AuditEvent]:
        """Every change made to the tenant through the API or the dashboard (one `action` only, if
        given), newest first, page after page (docs/audit.md)."""
        return self._each(ops.audit_pages(tenant, action, page_size))

    # Keys and signing secrets

    async def list_keys(self, tenant: str) -> list[ApiKey]:
        return (await self._do(ops.list_keys_op(tenant))).keys

    async def create_key(self, tenant: str, scopes: Sequence[str] | None = None) -> KeyCreated:
        """Another key, holding `scopes` (default: every scope, as the issuing key may give)."""
        return await self._do(ops.create_key_op(tenant, scopes))

    async def revoke_key(self, tenant: str, key_id: uuid.UUID | str) -> None:
        await self._do(ops.revoke_key_op(tenant, key_id))

    async def rotate_signing_secret(
        self, tenant: str, *, overlap_seconds: int | None = None
    ) -> SigningSecretCreated:
        return await self._do(ops.rotate_signing_secret_op(tenant, overlap_seconds))
