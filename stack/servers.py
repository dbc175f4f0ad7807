"""Postgres, NATS and Redis for a test session or a bench run: the URL in an environment variable
when it is set, else an embedded server from the PyPI wheels (app.dev) in a temp dir of its own."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.dev import EmbeddedNats, EmbeddedPostgres, EmbeddedRedis


@dataclass
class Services:
    postgres_url: str  # an admin database on the server, for CREATE DATABASE
    nats_url: str
    redis_url: str
    root: Path  # the temp dir the embedded servers keep their data in (~55 MB)
    origins: dict[str, str] = field(default_factory=dict)  # by service: "configured" | "embedded"
    embedded: list[Any] = field(default_factory=list)

    @classmethod
    def start(cls, env_prefix: str, prefix: str) -> Services:
        """Each service from `<env_prefix>DATABASE_URL`, `NATS_URL`, `REDIS_URL`; one unset or empty
        is started embedded in a temp dir named `prefix…`. Whatever started is stopped on failure."""
        root = Path(tempfile.mkdtemp(prefix=prefix))
        services = cls("", "", "", root)
        servers: dict[str, tuple[EmbeddedPostgres | EmbeddedNats | EmbeddedRedis, str]] = {
            "postgres": (EmbeddedPostgres(root / "postgres"), "DATABASE_URL"),
            "nats": (EmbeddedNats(root / "nats"), "NATS_URL"),
            "redis": (EmbeddedRedis(root / "redis"), "REDIS_URL"),
        }
        urls: dict[str, str] = {}
        try:
            for name, (server, variable) in servers.items():
                url = os.environ.get(env_prefix + variable)
                if url:
                    services.origins[name] = "configured"
                else:
                    services.origins[name] = "embedded"
                    url = str(server.start())
                    services.embedded.append(server)
                urls[name] = url
        except BaseException:
            services.stop()
            raise
        services.postgres_url, services.nats_url, services.redis_url = (
            urls["postgres"],
            urls["nats"],
            urls["redis"],
        )
        return services

    def stop(self) -> None:
        """Stops the embedded servers and removes their temp dir, whatever happened before."""
        try:
            for server in reversed(self.embedded):
                with contextlib.suppress(Exception):
                    server.stop()
        finally:
            self.embedded.clear()
            shutil.rmtree(self.root, ignore_errors=True)
