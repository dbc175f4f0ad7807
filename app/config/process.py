"""A process's settings: the servers it connects to, where it listens, and who it is."""

from __future__ import annotations

import os
import socket
from typing import Literal

from pydantic import Field, field_validator

from app.config.group import SettingsGroup


def _default_owner() -> str:
    # Kubernetes sets HOSTNAME to the pod name, so each replica's lease owner is unique for free.
    return os.environ.get("HOSTNAME") or socket.gethostname()


def nats_servers(url: str) -> list[str]:
    """A NATS_URL's servers (one, or several separated by commas), as nats-py's `servers` list."""
    return [u.strip() for u in url.split(",") if u.strip()]


class Process(SettingsGroup):
    # Connections. Unset URLs make `scheduler dev` start embedded servers; other commands require them.
    database_url: str | None = None
    """Postgres (15 or newer), e.g. `postgresql://app@db:5432/scheduler`."""
    nats_url: str | None = None
    """NATS with JetStream, e.g. `nats://nats:4222`; a cluster's servers separated by commas,
    `nats://n1:4222,nats://n2:4222,nats://n3:4222` (a connection moves to another when its server goes).
    """
    redis_url: str | None = None
    """Only for the hot index."""

    host: str = "127.0.0.1"
    """Bind address of the API, and of the engine's and worker's ops servers."""
    port: int = 8000
    """The API's port."""
    admin_token: str | None = None
    """Bearer token for tenant management; may act on any tenant."""
    engine: Literal["on", "off"] = "on"
    """`off`: the API process runs no engine."""
    api_workers: int = Field(default=1, ge=1, le=64)
    """API processes behind the port (uvicorn workers, each with its own engine unless `ENGINE=off`); one
    process uses one core at most.
    """
    owner: str = Field(default_factory=_default_owner)
    """Lease owner name; leave unset in Kubernetes (the pod name); default `$HOSTNAME`."""

    @field_validator("nats_url")
    @classmethod
    def _nats_servers(cls, value: str | None) -> str | None:
        if value is not None and value.strip() and not all(u.strip() for u in value.split(",")):
            raise ValueError("NATS_URL: an empty server in the list")
        return value

    @property
    def nats_servers(self) -> list[str]:
        return nats_servers(self.nats_url or "")

    @field_validator("database_url")
    @classmethod
    def _asyncpg_dsn(cls, value: str | None) -> str | None:
        # Accept SQLAlchemy-style URLs too; asyncpg wants a plain postgresql:// DSN.
        if value and value.startswith("postgresql+asyncpg://"):
            return "postgresql://" + value.removeprefix("postgresql+asyncpg://")
        return value
