"""The services a bench drives, and what it creates on them.

SCHEDULER_DATABASE_URL (an admin database: the bench creates and drops its own), SCHEDULER_NATS_URL
and SCHEDULER_REDIS_URL are used when set; each one that is not is replaced by an embedded server
from the PyPI wheels (app.dev), as `scheduler dev` and the tests do. Every scenario gets a database
`bench_<pid>` cloned from a template migrated once, and JetStream names and Redis keys of its own;
all of it is removed afterwards, whatever happened."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.js.errors import NotFoundError

from app.bus.jetstream import delete_streams
from app.bus.message import decode
from app.config import Settings, nats_servers
from stack import databases
from stack.databases import with_database
from stack.servers import Services
from stack.settings import isolated_settings

__all__ = ["Bench", "Services", "start_services", "with_database"]

ADMIN_TOKEN = "bench-admin-token"


def start_services() -> Services:
    services = Services.start("SCHEDULER_", prefix="scheduler-bench-")
    # Accept postgresql+asyncpg:// too.
    services.postgres_url = Settings(database_url=services.postgres_url).database_url or services.postgres_url
    return services


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

    @contextlib.asynccontextmanager
    async def database(self) -> AsyncIterator[str]:
        """A migrated database `bench_<pid>` with today's partitions (cloned from the template)."""
        admin = self.services.postgres_url
        if self.template is None:
            self.template = await databases.create_template(admin, f"bench_{self.pid}_tpl")
        name = await databases.clone_database(admin, self.template, f"bench_{self.pid}")
        try:
            yield with_database(admin, name)
        finally:
            await databases.drop_database(admin, name)

    async def close(self) -> None:
        if self.template is not None:
            await databases.drop_database(self.services.postgres_url, self.template)
            self.template = None

    def settings(self, database_url: str | None = None, **overrides: Any) -> Settings:
        """Settings as a deployment would have them (app defaults), with JetStream names, lease
        owner and Redis key of their own so nothing collides with other users of the same servers."""
        values: dict[str, Any] = {"log_level": "WARNING"}
        if self.batch_size is not None:
            values["batch_size"] = self.batch_size
        values.update(overrides)
        s = self.services
        return isolated_settings(
            database_url=database_url,
            nats_url=values.pop("nats_url", s.nats_url),
            redis_url=s.redis_url,
            admin_token=ADMIN_TOKEN,
            prefix="bench",
            **values,
        )

    async def nats(self, url: str | None = None) -> NATS:
        """A connection to the services' NATS, or to `url` (one server or several, comma-separated)."""
        servers = nats_servers(url or self.services.nats_url)
        return await nats.connect(servers=servers, name="scheduler-bench", max_reconnect_attempts=3)

    async def environment(self, *, redis: bool) -> dict[str, Any]:
        from bench.env import collect

        s = self.services
        return await collect(
            postgres_url=s.postgres_url,
            nats_url=s.nats_url,
            redis_url=s.redis_url if redis else None,
            origins=s.origins,
        )


async def delete_stream(nc: NATS, settings: Settings) -> None:
    """The settings' streams (every lane's)."""
    with contextlib.suppress(Exception):
        await delete_streams(nc.jetstream(), settings)


async def stream_runs(nc: NATS, stream: str) -> list[str]:
    """Every run the stream's messages carry, as "<run id>:<epoch>", read by sequence (nothing is
    consumed). A request a message: read it once a drain is over, not while it is measured."""
    state = (await nc.jetstream().stream_info(stream)).state
    runs: list[str] = []
    for seq in range(state.first_seq, state.last_seq + 1) if state.messages else ():
        with contextlib.suppress(NotFoundError):
            msg = await nc.jetstream().get_msg(stream, seq)
            runs += [run.msg_id for run in decode(msg.data or b"")]
    return runs


async def stream_messages(nc: NATS, stream: str) -> int:
    info = await nc.jetstream().stream_info(stream)
    return int(info.state.messages)
