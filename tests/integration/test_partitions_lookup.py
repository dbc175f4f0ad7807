"""DESIGN §2: GET /runs/{id} derives the day from the id and touches one partition, not all of them.

Proved on the plan of the exact statement the API runs (QUERIES["get_run"], with the bounds that
app.db.run_ids.scheduled_bounds derives from the id), over 40 daily partitions plus DEFAULT."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from app.db.queries import QUERIES
from app.db.run_ids import scheduled_bounds

DAYS_BEHIND, DAYS_AHEAD = 15, 25


def relations(plan: Any) -> Iterator[str]:
    """Every "Relation Name" in an EXPLAIN (FORMAT JSON) plan, at any depth."""
    if isinstance(plan, dict):
        for key, value in plan.items():
            if key == "Relation Name":
                yield value
            else:
                yield from relations(value)
    elif isinstance(plan, list):
        for item in plan:
            yield from relations(item)


async def explain(conn: asyncpg.Connection, sql: str, *args: object) -> list[str]:
    plan = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args)
    return list(relations(json.loads(plan) if isinstance(plan, str) else plan))


@pytest.fixture
async def runs_by_day(pool: asyncpg.Pool) -> dict[date, uuid.UUID]:
    """One partition per day over DAYS_BEHIND + DAYS_AHEAD days around today, and a run in each."""
    today = datetime.now(UTC).date()
    days = [today + timedelta(days=n) for n in range(-DAYS_BEHIND, DAYS_AHEAD)]
    out: dict[date, uuid.UUID] = {}
    async with pool.acquire() as conn:
        for day in days:
            await conn.execute("SELECT scheduler_create_day_partition($1)", day)
            at = datetime.combine(day, time(12, 34, 56, 789000), UTC)
            out[day] = await conn.fetchval(
                """INSERT INTO job_runs (id, scheduled_at, tenant_id, job, target, max_attempts,
                                         backoff_seconds, timeout_seconds, due_at)
                   VALUES (scheduler_run_id($1), $1, 'acme', 'hello', '{"type": "noop"}', 3, 10, 30, $1)
                   RETURNING id""",
                at,
            )
            # Another run the same day, so the lookup has to pick by id inside the partition too.
            await conn.execute(
                """INSERT INTO job_runs (id, scheduled_at, tenant_id, job, target, max_attempts,
                                         backoff_seconds, timeout_seconds, due_at)
                   VALUES (scheduler_run_id($1), $1, 'acme', 'hello', '{"type": "noop"}', 3, 10, 30, $1)""",
                at + timedelta(hours=1),
            )
        await conn.execute("ANALYZE job_runs")
    return out


async def all_partitions(conn: asyncpg.Connection) -> set[str]:
    rows = await conn.fetch(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'job_runs'::regclass"
    )
    return {r["relname"] for r in rows}


async def test_get_run_touches_exactly_one_partition(
    pool: asyncpg.Pool, runs_by_day: dict[date, uuid.UUID]
) -> None:
    query = QUERIES["get_run"]
    async with pool.acquire() as conn:
        # The API's pool (same factory) plans every statement with its values, as production does.
        assert await conn.fetchval("SHOW plan_cache_mode") == "force_custom_plan"
        partitions = await all_partitions(conn)
        assert len({p for p in partitions if p.startswith("job_runs_p")}) >= 40
        assert "job_runs_default" in partitions
        for day, run_id in runs_by_day.items():
            lo, hi = scheduled_bounds(run_id)
            args = query.args({"id": run_id, "lo": lo, "hi": hi, "tenant_id": None})
            # Of the runs' partitions, only the id's day (a rate-limited run's key is read beside it).
            touched = [t for t in await explain(conn, query.sql, *args) if t.startswith("job_runs")]
            assert touched == [f"job_runs_p{day:%Y%m%d}"], (day, touched)
            row = await conn.fetchrow(query.sql, *args)  # and it is the right row
            assert row is not None and row["id"] == run_id


async def test_lookup_by_id_alone_touches_every_partition(
    pool: asyncpg.Pool, runs_by_day: dict[date, uuid.UUID]
) -> None:
    """The contrast: without the bounds the id implies, Postgres probes every partition."""
    run_id = next(iter(runs_by_day.values()))
    async with pool.acquire() as conn:
        touched = await explain(conn, "SELECT * FROM job_runs WHERE id = $1", run_id)
        assert set(touched) == await all_partitions(conn)
        assert len(touched) > DAYS_BEHIND + DAYS_AHEAD


async def test_the_api_reads_runs_from_every_day(
    api: httpx.AsyncClient, tenant: dict, runs_by_day: dict[date, uuid.UUID]
) -> None:
    """The route runs that same statement: a run on any day comes back by its id alone."""
    for run_id in runs_by_day.values():
        r = await api.get(f"/runs/{run_id}", headers=tenant["auth"])
        assert r.status_code == 200, r.text
        assert r.json()["id"] == str(run_id)
