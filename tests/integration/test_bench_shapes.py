"""The bench's backlog shapes (bench.workload.due_burst): interleaved is round-robin at one instant,
contiguous puts each tenant's runs in one block of the claim's order, distinct gives every run a due
instant of its own."""

from __future__ import annotations

import itertools

import asyncpg
import pytest

from bench import workload

N, TENANTS = 120, 4


async def _burst(pool: asyncpg.Pool, shape: str) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        await workload.seed_tenants(conn, TENANTS)
        await workload.reset_runs(conn)
        await workload.due_burst(conn, N, TENANTS, 60.0, analyze=False, shape=shape)
        return list(await conn.fetch("SELECT tenant_id, due_at FROM job_runs ORDER BY due_at, tenant_id"))


def _switches(rows: list[asyncpg.Record]) -> int:
    return sum(a["tenant_id"] != b["tenant_id"] for a, b in itertools.pairwise(rows))


@pytest.mark.parametrize("shape", ["interleaved", "contiguous", "distinct"])
async def test_every_tenant_gets_its_share(pool: asyncpg.Pool, shape: str) -> None:
    rows = await _burst(pool, shape)
    assert len(rows) == N
    per_tenant = {t: sum(r["tenant_id"] == t for r in rows) for t in workload.tenant_ids(TENANTS)}
    assert set(per_tenant.values()) == {N // TENANTS}


async def test_interleaved_is_one_instant(pool: asyncpg.Pool) -> None:
    rows = await _burst(pool, "interleaved")
    assert len({r["due_at"] for r in rows}) == 1


async def test_contiguous_is_one_block_a_tenant_in_due_order(pool: asyncpg.Pool) -> None:
    rows = await _burst(pool, "contiguous")
    assert _switches(rows) == TENANTS - 1
    assert [rows[i * (N // TENANTS)]["tenant_id"] for i in range(TENANTS)] == workload.tenant_ids(TENANTS)


async def test_distinct_is_one_instant_a_run_round_robin(pool: asyncpg.Pool) -> None:
    rows = await _burst(pool, "distinct")
    assert len({r["due_at"] for r in rows}) == N
    assert _switches(rows) == N - 1
