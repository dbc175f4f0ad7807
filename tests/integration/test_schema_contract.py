"""app/db/schema/ is the database's contract: loaded into an empty database, it makes exactly what the
migrations make at head (compared through the catalogs, object by object), so the two never drift."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from app.db.catalog import differences, load_schema, snapshot
from app.db.schema_dump import compare, main, migrated
from stack import databases
from tests.support import Services, drop_database, with_database


@pytest_asyncio.fixture(loop_scope="session")
async def schema_database(services: Services) -> AsyncIterator[str]:
    """An empty database loaded from app/db/schema/."""
    name = await databases.create_database(services.postgres_url, f"s_{uuid.uuid4().hex[:16]}")
    url = with_database(services.postgres_url, name)
    conn = await asyncpg.connect(url)
    try:
        await load_schema(conn)
    finally:
        await conn.close()
    yield url
    await drop_database(services, name)


async def test_schema_matches_the_migrations_head(fresh_database: str, schema_database: str) -> None:
    await migrated(fresh_database)
    found = await compare(fresh_database, schema_database)
    assert not found, "app/db/schema/ and the migrations differ:\n" + "\n".join(found)


async def test_a_changed_function_is_named_with_its_file(schema_database: str) -> None:
    conn = await asyncpg.connect(schema_database)
    try:
        before = await snapshot(conn)
        # A comment and a re-indent are no change; a different constant is.
        await conn.execute("""
            CREATE OR REPLACE FUNCTION scheduler_start_deadline(attempt integer, expires_at timestamptz)
            RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
                -- a comment
                SELECT CASE WHEN $1 = 0
                            THEN $2 END
            $$""")
        assert differences(before, await snapshot(conn)) == []
        await conn.execute("""
            CREATE OR REPLACE FUNCTION scheduler_start_deadline(attempt integer, expires_at timestamptz)
            RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT CASE WHEN $1 = 1 THEN $2 END $$""")
        [difference] = differences(before, await snapshot(conn))
    finally:
        await conn.close()
    assert (
        difference.key
        == "function scheduler_start_deadline(attempt integer, expires_at timestamp with time zone)"
    )
    assert "update app/db/schema/20_runs.sql" in difference.describe()


async def test_schema_dump_prints_an_objects_text(
    schema_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = await main(
        ["--database-url", schema_database, "scheduler_queue_state", "run_queue", "nothing_such"]
    )
    out = capsys.readouterr().out
    assert "CREATE OR REPLACE FUNCTION public.scheduler_queue_state(status text, held text)" in out
    assert "scheduler_queue_held()" in out
    assert (
        "    state smallint not null" in out
        and "CONSTRAINT run_queue_pkey PRIMARY KEY (scheduled_at, id)" in out
    )
    assert "-- no function, trigger, index or table nothing_such" in out and status == 1
