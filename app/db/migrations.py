"""Alembic, driven from code: `scheduler migrate`, `scheduler dev`, the tests and the bench."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from app.db.connection import sqlalchemy_url


def alembic_config(database_url: str) -> Config:
    # alembic.ini sits at the project root: beside the package in a checkout, in the working
    # directory in the container image.
    root = Path(__file__).resolve().parent.parent.parent
    ini = root / "alembic.ini" if (root / "alembic.ini").exists() else Path("alembic.ini")
    config = Config(str(ini))
    config.set_main_option("script_location", str(ini.parent / "alembic"))
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(database_url))
    return config


def migrate(database_url: str) -> None:
    command.upgrade(alembic_config(database_url), "head")
