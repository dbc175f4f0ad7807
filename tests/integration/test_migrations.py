"""Migrations on a fresh database: upgrade head -> downgrade base -> upgrade head again."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import asyncpg
from alembic import command
from alembic.script import ScriptDirectory

from app.db.migrations import alembic_config

TABLES = {
    "tenants",
    "api_keys",
    "jobs",
    "job_runs",
    "job_runs_default",
    "idempotency_keys",
    "run_callbacks",
    "concurrency_slots",
    "concurrency_holders",
    "rate_limit_starts",
    "ui_sessions",
    "run_queue",
    "run_dependencies",
    "dedupe_keys",
    "run_tags",
    "run_tags_default",
    "run_groups",
    "audit_events",
    "audit_events_default",
}
FUNCTIONS = {
    "scheduler_run_id",
    "scheduler_partition_name",
    "scheduler_create_day_partition",
    "scheduler_retire_day_partition",
    "scheduler_analyze_stale_partitions",
    "scheduler_record_callback",
    "scheduler_concurrency_key",
    "scheduler_run_hold",
    "scheduler_job_in_flight",
    "scheduler_tenant_in_flight",
    "scheduler_tenant_room",
    "scheduler_flow_control",
    "scheduler_settle_dependents",
    "scheduler_release_hold",
    "scheduler_flow_hold_reason",
    "scheduler_append_attempt",
    "scheduler_tenant_flow_key",
    "scheduler_tenant_flow",
    "scheduler_queue_state",
    "scheduler_queue_added",
    "scheduler_queue_changed",
    "scheduler_queue_removed",
    "scheduler_queue_emptied",
    "scheduler_queue_pending",
    "scheduler_queue_dispatched",
    "scheduler_queue_running",
    "scheduler_queue_held",
    "scheduler_epoch_fence",
    "scheduler_slot_keys",
    "scheduler_start_deadline",
    "scheduler_failure_streak",
    "scheduler_counts_failures",
    "scheduler_dedupe_key",
    "scheduler_run_tags",
    "scheduler_record_tags",
    "scheduler_lead_tag",
    "scheduler_count_group_runs",
    "scheduler_attach_day_partition",
    "scheduler_create_tags_day_partition",
    "scheduler_drop_tags_day_partition",
    "scheduler_create_audit_day_partition",
    "scheduler_drop_audit_day_partition",
}


async def schema(url: str) -> tuple[set[str], set[str], str | None]:
    """(tables, scheduler functions, alembic revision) of the public schema."""
    conn = await asyncpg.connect(url)
    try:
        tables = {
            r["relname"]
            for r in await conn.fetch(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')"
            )
        }
        functions = {
            r["proname"]
            for r in await conn.fetch(
                "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = 'public' AND p.proname LIKE 'scheduler_%'"
            )
        }
        revision = (
            await conn.fetchval("SELECT version_num FROM alembic_version")
            if "alembic_version" in tables
            else None
        )
        return tables - {"alembic_version"}, functions, revision
    finally:
        await conn.close()


async def alembic(url: str, action: str, revision: str) -> None:
    # Alembic's env.py runs its own event loop, so it runs in a thread, as `scheduler migrate` would.
    await asyncio.to_thread(getattr(command, action), alembic_config(url), revision)


async def test_upgrade_downgrade_upgrade(fresh_database: str) -> None:
    url = fresh_database
    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    assert await schema(url) == (set(), set(), None)

    await alembic(url, "upgrade", "head")
    tables, functions, revision = await schema(url)
    assert tables >= TABLES and functions == FUNCTIONS and revision == head

    # Give the schema what a running system has: a day partition holding a row.
    conn = await asyncpg.connect(url)
    try:
        today = datetime.now(UTC).date()
        assert await conn.fetchval("SELECT scheduler_create_day_partition($1)", today) == "created"
        await conn.execute(
            """INSERT INTO job_runs (id, scheduled_at, tenant_id, job, target, max_attempts, backoff_seconds,
                                     timeout_seconds, due_at)
               VALUES (scheduler_run_id(now()), now(), 't', 'j', '{}', 1, 1, 1, now())"""
        )
    finally:
        await conn.close()
    assert f"job_runs_p{today:%Y%m%d}" in (await schema(url))[0]

    await alembic(url, "downgrade", "base")
    assert await schema(url) == (set(), set(), None)  # partitions, functions and all

    await alembic(url, "upgrade", "head")
    tables, functions, revision = await schema(url)
    assert tables == TABLES and functions == FUNCTIONS and revision == head
    await alembic(url, "upgrade", "head")  # at head, upgrading again is a no-op
    assert await schema(url) == (tables, functions, head)
