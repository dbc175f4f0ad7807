"""Alembic, driven from code: `scheduler migrate`, `scheduler dev`, the tests and the bench.

The migration scripts are found beside the package, never in the working directory: in a checkout
(or an editable install) they are the project's `alembic/`; an installed package carries them as
`app/db/alembic/` (the image's build puts them there). So `scheduler migrate` works from anywhere.
alembic.ini at the project root is for the `alembic` command line in a checkout; this needs none."""

from __future__ import annotations

from pathlib import Path

from alembic import command, op
from alembic.config import Config
from sqlalchemy.util import await_only

from app.db.connection import sqlalchemy_url

INSTALLED = Path(__file__).resolve().parent / "alembic"
CHECKOUT = Path(__file__).resolve().parent.parent.parent / "alembic"


def migrations_dir() -> Path:
    for candidate in (INSTALLED, CHECKOUT):
        if (candidate / "env.py").is_file():
            return candidate
    raise RuntimeError(f"no migration scripts beside the package (looked in {INSTALLED} and {CHECKOUT})")


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    # Options are interpolated (configparser): a "%" in a password must be doubled.
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(database_url).replace("%", "%%"))
    return config


def migrate(database_url: str) -> None:
    command.upgrade(alembic_config(database_url), "head")


def run_script(sql: str) -> None:
    """Inside a migration: run a multi-statement script over the simple query protocol (a prepared
    statement holds one statement)."""
    dbapi = op.get_bind().connection.dbapi_connection
    assert dbapi is not None  # a migration runs on an open connection
    await_only(dbapi.driver_connection.execute(sql))
