"""A database per test or scenario, cloned from a template migrated once (CREATE DATABASE …
TEMPLATE is a file copy: milliseconds, where migrating takes seconds)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import asyncpg


def with_database(url: str, database: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + database))


def _quoted(name: str) -> str:
    # Database names are built by the callers from a pid and hex, never from input; quote them anyway.
    assert name.replace("_", "").isalnum(), name
    return f'"{name}"'


async def _admin(admin_url: str, *statements: str) -> None:
    conn = await asyncpg.connect(admin_url)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


async def create_database(admin_url: str, name: str) -> str:
    """An empty database `name` (no schema: for migration tests)."""
    await _admin(admin_url, f"CREATE DATABASE {_quoted(name)}")
    return name


async def create_template(admin_url: str, name: str) -> str:
    """A database `name`, migrated and given its partitions, for clones to copy."""
    await _admin(
        admin_url, f"DROP DATABASE IF EXISTS {_quoted(name)} WITH (FORCE)", f"CREATE DATABASE {_quoted(name)}"
    )
    await prepare_template(admin_url, name)
    return name


async def prepare_template(admin_url: str, name: str) -> None:
    """Migrate a template and premake its partitions as of today (both idempotent: run again after
    midnight, it adds the new day)."""
    from app.dev import prepare_database

    await prepare_database(with_database(admin_url, name))


async def clone_database(admin_url: str, template: str, name: str) -> str:
    """`name` as a copy of `template` (an older `name` is dropped first)."""
    await _admin(
        admin_url,
        f"DROP DATABASE IF EXISTS {_quoted(name)} WITH (FORCE)",
        f"CREATE DATABASE {_quoted(name)} TEMPLATE {_quoted(template)}",
    )
    return name


async def drop_database(admin_url: str, name: str) -> None:
    await _admin(admin_url, f"DROP DATABASE IF EXISTS {_quoted(name)} WITH (FORCE)")
