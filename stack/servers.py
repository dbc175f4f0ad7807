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
    def start(cls, env_prefix: str, prefix: str, in_memory: bool = False) -> Services:
        """Each service from `<env_prefix>DATABASE_URL`, `NATS_URL`, `REDIS_URL`; one unset or empty
        is started embedded in a temp dir named `prefix…` — in memory (`memory_dir()`) where asked
        and the machine has one. Whatever started is stopped on failure."""
        memory = memory_dir() if in_memory else None
        root = Path(tempfile.mkdtemp(prefix=prefix, dir=memory))
        services = cls("", "", "", root)
        # In memory, WAL is kept to a few segments past each checkpoint (cheap there): a test session
        # writes ~5 MB of it per database cloned, and the default lets it reach 1 GB per server.
        wal = {"max_wal_size": "128MB", "min_wal_size": "32MB"} if memory else None
        servers: dict[str, tuple[EmbeddedPostgres | EmbeddedNats | EmbeddedRedis, str]] = {
            "postgres": (EmbeddedPostgres(root / "postgres", wal), "DATABASE_URL"),
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


# Room a test session's servers may take in memory: Postgres's data (~55 MB, its WAL bounded by the
# max_wal_size a test server is given) and JetStream's, with room to spare.
MEMORY_DIR_FREE_BYTES = 2 << 30


def memory_dir() -> str | None:
    """A directory in RAM (Linux's /dev/shm, a tmpfs) with room for a test session's servers, else
    None (the default temp dir). Each test's database is a clone of a template, hundreds of files
    made and removed; on ext4 making a file scans past the inodes deleted in the last seconds, so
    under a suite's churn a clone costs several times what it does on tmpfs, in kernel time. Nothing
    here needs the disk: a server the fault tests crash (`-m immediate`, kill -9) loses nothing the
    page cache holds."""
    path = "/dev/shm"  # noqa: S108 - only the parent: mkdtemp makes a private directory in it
    if not os.path.isdir(path) or not os.access(path, os.W_OK):
        return None
    stats = os.statvfs(path)
    return path if stats.f_bavail * stats.f_frsize >= MEMORY_DIR_FREE_BYTES else None
