"""The listing by tag is an index read whatever the history (migration 0022): proved on the plans of
the exact statements the API runs (QUERIES["list_tagged_runs"], ["match_tagged_runs"]), executed
over a history ten times larger than the page; and run_tags' days follow the runs' days through
partition maintenance (made, stranded rows moved, dropped with the runs)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from app.config import Settings
from app.db.queries import QUERIES
from app.engine.partitions import PartitionMaintenance
from tests import factories
from tests.support import submit_run

PAGE = 50
HISTORY = 20 * PAGE * 10  # 10,000 runs carrying "common", 10 of them "rare" too


async def tagged_history(conn: asyncpg.Connection, runs: int) -> None:
    """`runs` terminal runs of tenant acme over the three days up to noon today (UTC), each tagged
    "common" (and every 1000th "rare"); the trigger of migration 0022 writes their run_tags rows.
    Up to noon, not now: just after midnight today's partition held a handful of runs, one page the
    planner rightly scans instead of probing its index, whatever the history."""
    await factories.job(conn, "acme", "j")
    await conn.execute(
        """
        INSERT INTO job_runs (id, scheduled_at, tenant_id, job, status, target, max_attempts,
                              backoff_seconds, timeout_seconds, due_at, tags)
        SELECT scheduler_run_id(s.at), s.at, 'acme', 'j', 'succeeded', '{}', 1, 1, 1, s.at,
               CASE WHEN g % 1000 = 0 THEN ARRAY['common', 'rare'] ELSE ARRAY['common'] END
        FROM generate_series(1, $1) AS g
        CROSS JOIN LATERAL (
            SELECT date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '12 hours'
                   - make_interval(secs => g * 3 * 86400.0 / $1)
        ) AS s(at)
        """,
        runs,
    )
    assert await conn.fetchval("SELECT count(*) FROM run_tags") == runs + runs // 1000
    await conn.execute("ANALYZE job_runs, run_tags")


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(n for child in plan.get("Plans", []) for n in nodes(child))]


def read_from(plan: dict[str, Any], prefix: str) -> tuple[int, int]:
    """(rows, executions) of the executed scans of relations named `prefix`…, over the whole plan."""
    scans = [n for n in nodes(plan) if str(n.get("Relation Name", "")).startswith(prefix)]
    executed = [n for n in scans if n.get("Actual Loops", 0) > 0]
    return (
        sum(int(n["Actual Rows"]) * int(n["Actual Loops"]) for n in executed),
        sum(int(n["Actual Loops"]) for n in executed),
    )


async def explain(conn: asyncpg.Connection, name: str, **binds: object) -> dict[str, Any]:
    q = QUERIES[name]
    values = {
        "tenant_id": "acme",
        "job": None,
        "scheduled_after": None,
        "scheduled_before": None,
        "cursor_at": None,
        "cursor_id": None,
        "limit": PAGE,
        **binds,
    }
    plan = await conn.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + q.sql, *q.args(values))
    return dict(plan[0]["Plan"])


@pytest.mark.parametrize(
    ("name", "filters"),
    [
        ("list_tagged_runs", {"status": None}),
        ("match_tagged_runs", {"statuses": ["succeeded"], "ids": None, "by_error": False, "error": None}),
    ],
)
async def test_a_page_by_tag_reads_a_page_of_the_tags_index_whatever_the_history(
    pool: asyncpg.Pool, name: str, filters: dict[str, object]
) -> None:
    async with pool.acquire() as conn:
        assert await conn.fetchval("SHOW plan_cache_mode") == "force_custom_plan"  # as the API plans
        await tagged_history(conn, HISTORY)
        days = await conn.fetchval("SELECT count(*) FROM pg_inherits WHERE inhparent = 'run_tags'::regclass")
        plan = await explain(conn, name, tags=["common"], **filters)
        assert int(plan["Actual Rows"]) == PAGE
        tag_rows, _ = read_from(plan, "run_tags")
        run_rows, run_probes = read_from(plan, "job_runs")
        # One tag's index read backwards: the page and at most one entry more per day (the merge's
        # look-ahead), each joined to its run by one probe. Planned as a join of the whole tag, it read
        # all 10,000 of both.
        assert tag_rows <= PAGE + days, (tag_rows, days)
        assert run_rows == PAGE and run_probes == PAGE, (run_rows, run_probes)
        executed = {n["Node Type"] for n in nodes(plan) if n.get("Actual Loops", 0) > 0}
        assert not executed & {"Hash Join", "Seq Scan", "Bitmap Heap Scan"}, executed

        # Beside a rare tag, the rare one leads: its ten runs are read, not the common tag's 10,000
        # (counted, up to 10,000 each, to choose the lead).
        plan = await explain(conn, name, tags=["common", "rare"], **filters)
        assert int(plan["Actual Rows"]) == HISTORY // 1000
        _, run_probes = read_from(plan, "job_runs")
        assert run_probes == HISTORY // 1000, run_probes


def tags_day(day: date) -> str:
    return f"run_tags_p{day:%Y%m%d}"


async def tags_days(pool: asyncpg.Pool) -> set[str]:
    rows = await pool.fetch(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'run_tags'::regclass"
    )
    return {r["relname"] for r in rows}


async def test_tags_days_follow_the_runs_days(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    auth = tenant["auth"]
    today: date = await pool.fetchval("SELECT (now() AT TIME ZONE 'UTC')::date")
    runs_days = {
        r["relname"].removeprefix("job_runs_p")
        for r in await pool.fetch(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'job_runs'::regclass AND c.relname LIKE 'job_runs_p%'"
        )
    }
    assert {f"run_tags_p{d}" for d in runs_days} | {"run_tags_default"} == await tags_days(pool)

    # A tagged run beyond the premade days waits in both DEFAULTs, and moves with its day.
    far = today + timedelta(days=20)
    run = await submit_run(
        api,
        "acme",
        auth,
        job="hello",
        tags=["far"],
        scheduled_at=datetime.combine(far, time(12), UTC).isoformat(),
    )
    assert await pool.fetchval("SELECT count(*) FROM run_tags_default") == 1
    report = await PartitionMaintenance(settings.model_copy(update={"premake_days": 21}), pool).step()
    assert f"{far}: created, moved 1" in report["tags"], report
    assert await pool.fetchval("SELECT count(*) FROM run_tags_default") == 0
    home = await pool.fetchval("SELECT tableoid::regclass::text FROM run_tags WHERE run_id = $1", run["id"])
    assert home == tags_day(far)
    listed = await api.get("/tenants/acme/runs", params={"tag": "far"}, headers=auth)
    assert [r["id"] for r in listed.json()["runs"]] == [run["id"]]

    # A day past retention goes with its tags; a day that is kept keeps them.
    old = today - timedelta(days=settings.retention_days + 2)
    async with pool.acquire() as conn:
        await conn.execute("SELECT scheduler_create_day_partition($1)", old)
        await factories.job(conn, "acme", "j")
        await conn.execute(
            """INSERT INTO job_runs (id, scheduled_at, tenant_id, job, status, target, max_attempts,
                                     backoff_seconds, timeout_seconds, due_at, tags)
               VALUES (scheduler_run_id($1), $1, 'acme', 'j', 'succeeded', '{}', 1, 1, 1, $1, '{old}')""",
            datetime.combine(old, time(6), UTC),
        )
    assert tags_day(old) not in await tags_days(pool)  # its tags waited in DEFAULT: no day yet
    report = await PartitionMaintenance(settings, pool).step()
    assert report["dropped"] == [str(old)], report
    assert f"{old}: created, moved 1" in report["tags"] and f"{old}: dropped" in report["tags"], report
    assert tags_day(old) not in await tags_days(pool)
    assert await pool.fetchval("SELECT count(*) FROM run_tags WHERE tag = 'old'") == 0
