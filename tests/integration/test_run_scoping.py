"""Tenant scoping of runs lives in the statements (app/db/runs.get_run, cancel_run): another
tenant's run is not found and not touched; the admin (tenant None) reaches every tenant's."""

from __future__ import annotations

import uuid

import asyncpg
import httpx
import pytest

from app.db import runs as run_repo
from app.errors import Conflict, NotFound
from app.services import runs as run_service
from tests.support import create_tenant, submit_run


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
        await run_service.cancel_run(pool, run_id, "beta")
    assert await pool.fetchval("SELECT status FROM job_runs WHERE id = $1", run_id) == "pending"

    assert (await run_service.get_run(pool, run_id, None))["tenant_id"] == "acme"  # the admin
    cancelled = await run_service.cancel_run(pool, run_id, "acme")
    assert cancelled["status"] == "cancelled"
    with pytest.raises(Conflict) as again:
        await run_service.cancel_run(pool, run_id, "acme")
    assert again.value.field == "status"
