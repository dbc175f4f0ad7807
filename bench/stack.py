"""The services a bench drives, and what it creates on them.

SCHEDULER_DATABASE_URL (an admin database: the bench creates and drops its own), SCHEDULER_NATS_URL
and SCHEDULER_REDIS_URL are used when set; each one that is not is replaced by an embedded server
from the PyPI wheels (app.dev), as `scheduler dev` and the tests do. Every scenario gets a database
`bench_<pid>` cloned from a template migrated once, and JetStream names and Redis keys of its own;
all of it is removed afterwards, whatever happened."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import nats
from nats.aio.client import Client as NATS

from app.config import Settings
from app.dev import EmbeddedNats, EmbeddedPostgres, EmbeddedRedis

ADMIN_TOKEN = "bench-admin-token"


def with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + database))


def _quoted(name: str) -> str:
    # Database names are built here from the pid and hex, never from input; quote them anyway.
    assert name.replace("_", "").isalnum(), name
    return f'"{name}"'


@dataclass
class Services:
    postgres_url: str  # an admin database on the server, for CREATE DATABASE
    nats_url: str
    redis_url: str
    origins: dict[str, str]
    root: Path
    embedded: list[Any] = field(default_factory=list)

    @classmethod
    def start(cls) -> Services:
        root = Path(tempfile.mkdtemp(prefix="scheduler-bench-"))
        embedded: list[Any] = []
        origins: dict[str, str] = {}

        def pick(name: str, env: str, server: Any) -> str:
            url = os.environ.get(env)
            if url:
                origins[name] = "configured"
                return url
            origins[name] = "embedded"
            url = str(server.start())
            embedded.append(server)
            return url

        try:
            pg = pick("postgres", "SCHEDULER_DATABASE_URL", EmbeddedPostgres(root / "postgres"))
            nt = pick("nats", "SCHEDULER_NATS_URL", EmbeddedNats(root / "nats"))
            rd = pick("redis", "SCHEDULER_REDIS_URL", EmbeddedRedis(root / "redis"))
        except BaseException:
            for server in reversed(embedded):
                server.stop()
            shutil.rmtree(root, ignore_errors=True)
            raise
        pg = Settings(database_url=pg).database_url or pg  # accept postgresql+asyncpg:// too
        return cls(pg, nt, rd, origins, root, embedded)

    def stop(self) -> None:
        for server in reversed(self.embedded):
            with contextlib.suppress(Exception):
                server.stop()
        self.embedded.clear()
        shutil.rmtree(self.root, ignore_errors=True)


class Bench:
    """What a scenario gets: the services, a fresh database, settings with names of its own, and
    a place for process logs. Cleans up after itself."""

    def __init__(self, services: Services, *, smoke: bool, out: Path, batch_size: int | None = None):
        self.services = services
        self.smoke = smoke
        self.out = out
        self.batch_size = batch_size
        self.pid = os.getpid()
        self.template: str | None = None
        self.logs = services.root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    async def _admin(self) -> asyncpg.Connection:
        return await asyncpg.connect(self.services.postgres_url)

    async def _ensure_template(self) -> str:
        if self.template is None:
            from app.dev import prepare_database

            name = f"bench_{self.pid}_tpl"
            conn = await self._admin()
            try:
                await conn.execute(f"DROP DATABASE IF EXISTS {_quoted(name)} WITH (FORCE)")
                await conn.execute(f"CREATE DATABASE {_quoted(name)}")
            finally:
                await conn.close()
            self.template = name
            url = with_database(self.services.postgres_url, name)
            await prepare_database(url)
        return self.template

    @contextlib.asynccontextmanager
    async def database(self) -> AsyncIterator[str]:
        """A migrated database `bench_<pid>` with today's partitions (cloned from the template)."""
        template = await self._ensure_template()
        name = f"bench_{self.pid}"
        conn = await self._admin()
        try:
            await conn.execute(f"DROP DATABASE IF EXISTS {_quoted(name)} WITH (FORCE)")
            await conn.execute(f"CREATE DATABASE {_quoted(name)} TEMPLATE {_quoted(template)}")
        finally:
            await conn.close()
        try:
            yield with_database(self.services.postgres_url, name)
        finally:
            await self._drop(name)

    async def _drop(self, name: str) -> None:
        conn = await self._admin()
        try:
            await conn.execute(f"DROP DATABASE IF EXISTS {_quoted(name)} WITH (FORCE)")
        finally:
            await conn.close()

    async def close(self) -> None:
        if self.template is not None:
            await self._drop(self.template)
            self.template = None

    def settings(self, database_url: str | None = None, **overrides: Any) -> Settings:
        """Settings as a deployment would have them (app defaults), with JetStream names, lease
        owner and Redis key of their own so nothing collides with other users of the same servers."""
        uid = uuid.uuid4().hex[:10]
        values: dict[str, Any] = {
            "database_url": database_url,
            "nats_url": self.services.nats_url,
            "redis_url": self.services.redis_url,
            "admin_token": ADMIN_TOKEN,
            "allow_private_targets": True,
            "stream": f"BENCH_{uid}",
            "subject_prefix": f"bench_{uid}",
            "consumer": f"bench_workers_{uid}",
            "owner": f"bench-{uid}",
            "log_level": "WARNING",
        }
        if self.batch_size is not None:
            values["batch_size"] = self.batch_size
        values.update(overrides)
        return Settings(**values)

    async def nats(self) -> NATS:
        return await nats.connect(self.services.nats_url, name="scheduler-bench", max_reconnect_attempts=3)

    async def environment(self, *, redis: bool) -> dict[str, Any]:
        from bench.env import collect

        s = self.services
        return await collect(
            postgres_url=s.postgres_url,
            nats_url=s.nats_url,
            redis_url=s.redis_url if redis else None,
            origins=s.origins,
        )


async def delete_stream(nc: NATS, stream: str) -> None:
    with contextlib.suppress(Exception):
        await nc.jetstream().delete_stream(stream)


async def stream_messages(nc: NATS, stream: str) -> int:
    info = await nc.jetstream().stream_info(stream)
    return int(info.state.messages)


async def _to_thread(fn: Any, *args: Any) -> Any:
    import asyncio

    return await asyncio.to_thread(fn, *args)
