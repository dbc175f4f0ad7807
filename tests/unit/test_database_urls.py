"""A database URL naming several servers (libpq's multi-host form) reaches asyncpg asking for the
writable one, and SQLAlchemy's asyncpg dialect (alembic) as the same hosts and ports."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import create_async_engine

from app.db.connection import sqlalchemy_url, writable_dsn


def connect_args(database_url: str) -> dict[str, object]:
    """What SQLAlchemy's dialect would pass to asyncpg.connect for the URL alembic gets."""
    engine = create_async_engine(sqlalchemy_url(database_url))
    try:
        _, kwargs = engine.dialect.create_connect_args(engine.url)
        return dict(kwargs)
    finally:
        engine.sync_engine.dispose()


def test_one_server_is_left_as_it_is() -> None:
    url = "postgresql://app:secret@db:5432/scheduler?sslmode=disable"
    assert writable_dsn(url) == url
    assert sqlalchemy_url(url) == "postgresql+asyncpg://app:secret@db:5432/scheduler?sslmode=disable"


def test_several_servers_ask_for_the_writable_one() -> None:
    assert writable_dsn("postgresql://app@db1:5432,db2:5432/scheduler") == (
        "postgresql://app@db1:5432,db2:5432/scheduler?target_session_attrs=read-write"
    )
    # What the URL says wins.
    url = "postgresql://app@db1,db2/scheduler?target_session_attrs=primary"
    assert writable_dsn(url) == url


def test_alembic_gets_every_host_with_its_port() -> None:
    args = connect_args("postgresql://app:p%40ss@db1:6432,db2/scheduler?target_session_attrs=read-write")
    assert args["host"] == ["db1", "db2"]
    assert args["port"] == [6432, 5432]  # a host without a port has libpq's default
    assert args["user"] == "app" and args["password"] == "p@ss" and args["database"] == "scheduler"
    assert args["target_session_attrs"] == "read-write"


def test_alembic_asks_for_the_writable_one_too() -> None:
    assert (
        connect_args("postgresql://app@db1:5432,db2:5432/scheduler")["target_session_attrs"] == "read-write"
    )
