"""Alembic environment: runs migrations over SQLAlchemy's asyncpg dialect.

The URL comes from `sqlalchemy.url` when a caller set it (tests, `scheduler migrate`), else from
SCHEDULER_DATABASE_URL. Migrations are raw SQL: the partitioned table, its indexes and functions
are Postgres-specific and read best as SQL.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from app.db.connection import sqlalchemy_url

config = context.config


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or sqlalchemy_url(None)


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=None, transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = create_async_engine(_url())
    async with engine.connect() as connection:
        await connection.run_sync(_run)
    await engine.dispose()


if context.is_offline_mode():
    context.configure(url=_url(), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_async())
