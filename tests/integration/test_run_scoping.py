"""Tenant scoping of runs lives in the statements (app/db/runs.get_run, cancel_run, retry_runs,
reschedule_run, match_runs, cancel_runs): another tenant's run is not found and not touched; the
admin (tenant None) reaches every tenant's."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import asyncpg
import httpx
import pytest

from app.db import runs as run_repo
from app.db.runs import TimeRange
from app.domain import no_stop_notice
from app.errors import Conflict, NotFound
from app.services import runs as run_service
from app.services.admission import AdmissionControl
from app.services.run_actions import RunFilter, act_on_runs
from tests.support import AS_ADMIN, create_tenant, submit_run


async def test_another_tenants_run_is_neither_read_nor_cancelled(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    await create_tenant(api, "beta")
    run_id = uuid.UUID((await submit_run(api, "acme", tenant["auth"], job="hello"))["id"])
    async with pool.acquire() as conn:
        assert await run_repo.get_run(conn, run_id, "beta") is None
        assert await run_repo.cancel_run(conn, run_id, "beta") is None
    assert await pool.fetchval("SELECT status FROM job_runs WHERE id = $1", run_id) == "pending"
    with pytest.raises(NotFound):
        await run_service.get_run(pool, run_id, "beta")
    with pytest.raises(NotFound):
        await run_service.cancel_run(pool, run_id, "beta", no_stop_notice, audit=AS_ADMIN)
    assert await pool.fetchval("SELECT status FROM job_runs WHERE id = $1", run_id) == "pending"

    assert (await run_service.get_run(pool, run_id, None))["tenant_id"] == "acme"  # the admin
    cancelled = await run_service.cancel_run(pool, run_id, "acme", no_stop_notice, audit=AS_ADMIN)
    assert cancelled["status"] == "cancelled"
    with pytest.raises(Conflict) as again:
        await run_service.cancel_run(pool, run_id, "acme", no_stop_notice, audit=AS_ADMIN)
    assert again.value.field == "status"


async def test_another_tenants_run_is_neither_retried_rescheduled_nor_bulk_changed(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    await create_tenant(api, "beta")
    pending = uuid.UUID((await submit_run(api, "acme", tenant["auth"], job="hello"))["id"])
    cancelled = uuid.UUID((await submit_run(api, "acme", tenant["auth"], job="hello"))["id"])
    await run_service.cancel_run(pool, cancelled, "acme", no_stop_notice, audit=AS_ADMIN)
    now = datetime.now(UTC)
    async with pool.acquire() as conn:
        assert await run_repo.retry_runs(conn, "beta", [cancelled]) == []
        assert await run_repo.reschedule_run(conn, pending, "beta", now) is None
        assert await run_repo.cancel_runs(conn, "beta", [pending]) == []
        everything = TimeRange()
        assert (
            await run_repo.match_runs(
                conn, "beta", statuses=None, job=None, ids=None, scheduled=everything, cursor=None, limit=100
            )
            == []
        )
    statuses = dict(await pool.fetch("SELECT id, status FROM job_runs"))
    assert statuses == {pending: "pending", cancelled: "cancelled"}

    admission = AdmissionControl(100)
    with pytest.raises(NotFound):
        await run_service.retry_run(pool, admission, cancelled, "beta", None, audit=AS_ADMIN)
    with pytest.raises(NotFound):
        await run_service.reschedule_run(pool, pending, "beta", now, 365, audit=AS_ADMIN)
    outcome = await act_on_runs(
        pool,
        admission,
        no_stop_notice,
        "beta",
        "cancel",
        RunFilter(ids=[pending, cancelled]),
        100,
        None,
        audit=AS_ADMIN,
    )
    assert (outcome.matched, outcome.changed) == (0, 0)
    assert dict(await pool.fetch("SELECT id, status FROM job_runs")) == statuses

    # The admin reaches any tenant's run.
    assert (await run_service.retry_run(pool, admission, cancelled, None, None, audit=AS_ADMIN))[
        "status"
    ] == "pending"
