"""Compare app/db/schema/ with the migrations, or print an object's current text at head.

    python -m app.db.schema_dump --server postgresql://postgres@127.0.0.1:5432/postgres --check
    python -m app.db.schema_dump --server URL scheduler_run_hold job_runs_queue_added run_queue

`--server` names a Postgres server (any database on it): two scratch databases are made there, one
migrated to head, one loaded from app/db/schema/, and dropped after. `--database-url` reads an
already migrated database instead (printing only). A name is a function, trigger, index or table;
a table prints as its columns and constraints, which is what a schema file's CREATE TABLE holds."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from app.db.catalog import differences, load_schema, snapshot
from app.db.migrations import migrate


def _with_database(url: str, database: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + database))


@asynccontextmanager
async def scratch_database(server: str) -> AsyncIterator[str]:
    """The URL of an empty database on `server`, dropped on exit."""
    name = f"schema_{uuid.uuid4().hex[:16]}"
    admin = await asyncpg.connect(server)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield _with_database(server, name)
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def migrated(url: str) -> None:
    # Alembic's env.py runs its own event loop, so it runs in a thread, as `scheduler migrate` does.
    await asyncio.to_thread(migrate, url)


async def loaded(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await load_schema(conn)
    finally:
        await conn.close()


async def compare(migrated_url: str, schema_url: str) -> list[str]:
    """One description per object that differs between the two databases (empty: they agree)."""
    a, b = await asyncpg.connect(migrated_url), await asyncpg.connect(schema_url)
    try:
        return [d.describe() for d in differences(await snapshot(a), await snapshot(b))]
    finally:
        await a.close()
        await b.close()


_TEXT = [
    "SELECT pg_get_functiondef(p.oid) || ';' FROM pg_proc p "
    "WHERE p.pronamespace = 'public'::regnamespace AND p.proname = $1",
    "SELECT pg_get_triggerdef(t.oid, true) || ';' FROM pg_trigger t "
    "WHERE NOT t.tgisinternal AND t.tgname = $1",
    "SELECT pg_get_indexdef(i.oid) || ';' FROM pg_class i "
    "WHERE i.relnamespace = 'public'::regnamespace AND i.relkind IN ('i', 'I') AND i.relname = $1",
]


async def definitions(conn: asyncpg.Connection, name: str) -> list[str]:
    """The current text of every object called `name`."""
    found = [row[0] for query in _TEXT for row in await conn.fetch(query, name)]
    objects = await snapshot(conn)
    table = objects.get(f"table {name}")
    if table is not None:
        lines = [f"-- {table}"]
        columns = await conn.fetch(
            "SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0"
            " AND NOT attisdropped ORDER BY attnum",
            name,
        )
        lines += [f"    {c[0]} {objects[f'column {name}.{c[0]}']}" for c in columns]
        lines += [
            f"    CONSTRAINT {key.split('.', 1)[1]} {d}"
            for key, d in objects.items()
            if key.startswith(f"constraint {name}.")
        ]
        found.append("\n".join(lines))
    return found


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.db.schema_dump", description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--server", help="a Postgres URL where scratch databases may be made")
    where.add_argument("--database-url", help="a database already migrated to head (printing only)")
    parser.add_argument("--check", action="store_true", help="compare app/db/schema/ with the migrations")
    parser.add_argument("names", nargs="*", help="functions, triggers, indexes or tables to print")
    args = parser.parse_args(argv)
    if args.check and not args.server:
        parser.error("--check needs --server")
    async with _head(args.server, args.database_url) as url:
        status = 0
        if args.check:
            async with scratch_database(args.server) as schema_url:
                await loaded(schema_url)
                found = await compare(url, schema_url)
            print("\n".join(found) if found else "app/db/schema/ matches the migrations' head")
            status = 1 if found else 0
        conn = await asyncpg.connect(url)
        try:
            for name in args.names:
                texts = await definitions(conn, name)
                print(
                    "\n\n".join(texts) if texts else f"-- no function, trigger, index or table {name}",
                    end="\n\n",
                )
                status = status if texts else 1
        finally:
            await conn.close()
    return status


@asynccontextmanager
async def _head(server: str | None, database_url: str | None) -> AsyncIterator[str]:
    if database_url:
        yield database_url
        return
    assert server is not None
    async with scratch_database(server) as url:
        await migrated(url)
        yield url


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
