"""One process's runtime: what it connects to and builds from its settings (Postgres pool, NATS
connection, hot index, readiness checks), built once here for the API, the engine, the worker and
`scheduler dev` alike.

A process opens its port first and connects in the background, retrying with backoff: /healthz
answers at once, /readyz says what it still waits for (503), and a stop request (SIGTERM) ends the
wait at once. Before, a process that could not reach a dependency retried forever inside its
start-up, never opened its port, and ignored SIGTERM until SIGKILL."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import asyncpg
from nats.aio.client import Client as NATS

from app import pending
from app.bus.jetstream import close as close_nats
from app.bus.jetstream import connect as connect_nats
from app.config import Settings
from app.db.connection import create_pool

if TYPE_CHECKING:
    from app.bus.hot_index import HotIndex

log = logging.getLogger(__name__)
T = TypeVar("T")
Check = Callable[[], Awaitable[object]]

FIRST_DELAY_SECONDS = 0.5
MAX_DELAY_SECONDS = 10.0


class NotConnected(ConnectionError):
    """A readiness check of a dependency the process has not reached yet."""


async def until_connected(connect: Callable[[], Awaitable[T]], what: str, stop: asyncio.Event) -> T | None:
    """`connect()` until it succeeds, sleeping a jittered, doubling delay between attempts; None as
    soon as `stop` is set (an attempt in flight is abandoned)."""
    delay = FIRST_DELAY_SECONDS
    while not stop.is_set():
        attempt = asyncio.ensure_future(connect())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait({attempt, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not attempt.done():
            attempt.cancel()
            with contextlib.suppress(BaseException):
                await attempt
            return None
        try:
            return attempt.result()
        except Exception as exc:
            wait = delay * random.uniform(0.8, 1.2)  # replicas started together do not retry in step
            log.warning("%s unreachable (%s: %s); retrying in %.1fs", what, type(exc).__name__, exc, wait)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), wait)
        delay = min(delay * 2, MAX_DELAY_SECONDS)
    return None


def hot_index_of(settings: Settings) -> HotIndex | None:
    """The Redis hot index when it is on; None otherwise (the claim then scans Postgres alone)."""
    if settings.hot_index == "redis" and settings.redis_url:
        from app.bus.hot_index import HotIndex  # the Redis client: imported only when it is on

        return HotIndex(settings.redis_url, f"{settings.stream}:due")
    return None


class Runtime:
    """The Postgres pool, (when the process needs it) the NATS connection and the hot index of one
    process, and the readiness checks that say whether it has reached them. Nothing connects until
    `connect*` is called; `close()` closes whatever was made."""

    def __init__(
        self,
        settings: Settings,
        name: str,
        *,
        nats: bool = True,
        nats_optional: bool = False,
        min_size: int = 2,
        max_size: int = 10,
        session_state: bool = True,
        hot_index: bool = True,
    ):
        assert settings.database_url and (settings.nats_url or not nats)
        self.settings = settings
        self.database_url = settings.database_url
        self.nats_url = settings.nats_url if nats else None
        # Reached when it can be, but not what readiness waits for: the API without an engine only
        # sends cancel notices over it, which the workers' heartbeats stand in for.
        self.nats_optional = nats_optional
        self.name = name
        self.pool_sizes = (min_size, max_size)
        self.session_state = session_state
        self.pool: asyncpg.Pool | None = None
        self.nc: NATS | None = None
        # When on, the hot index hears of every run this process makes pending (app.pending), and
        # the engine's claim reads it (app.engine.claims).
        self.hot_index = hot_index_of(settings) if hot_index else None
        self._unsubscribe = pending.subscribe(self.hot_index.add) if self.hot_index is not None else None
        self.more_pools: list[asyncpg.Pool] = []

    async def connect(self, stop: asyncio.Event) -> bool:
        """Reach every dependency; False if `stop` came first."""
        return await self.connect_postgres(stop) and await self.connect_nats(stop)

    async def connect_postgres(self, stop: asyncio.Event) -> bool:
        min_size, max_size = self.pool_sizes
        self.pool = await until_connected(
            lambda: create_pool(
                self.database_url,
                min_size=min_size,
                max_size=max_size,
                name=self.name,
                session_state=self.session_state,
            ),
            "postgres",
            stop,
        )
        return self.pool is not None

    async def connect_nats(self, stop: asyncio.Event) -> bool:
        if self.nats_url is None:
            return True
        url = self.nats_url
        self.nc = await until_connected(
            lambda: connect_nats(url, self.name, retry_at_start=False), "nats", stop
        )
        return self.nc is not None

    async def another_pool(
        self, stop: asyncio.Event, name: str, *, min_size: int, max_size: int
    ) -> asyncpg.Pool | None:
        """A second pool for a part with session state of its own (the API's engine LISTENs and holds
        advisory locks); closed with the rest. None if `stop` came first."""
        url = self.database_url
        pool = await until_connected(
            lambda: create_pool(url, min_size=min_size, max_size=max_size, name=name), "postgres", stop
        )
        if pool is not None:
            self.more_pools.append(pool)
        return pool

    def checks(self) -> dict[str, Check]:
        """Readiness checks by name: what the process needs, failing until it has reached it."""

        async def postgres() -> None:
            if self.pool is None:
                raise NotConnected("postgres not reached yet")
            async with self.pool.acquire() as conn:
                await conn.fetchval("SELECT 1")

        async def nats() -> None:
            if self.nc is None:
                raise NotConnected("nats not reached yet")
            if not self.nc.is_connected:
                raise NotConnected("nats disconnected")
            await self.nc.flush(timeout=1)

        needs_nats = self.nats_url is not None and not self.nats_optional
        return {"postgres": postgres, "nats": nats} if needs_nats else {"postgres": postgres}

    async def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self.hot_index is not None:
            await self.hot_index.close()
        if self.nc is not None:
            await close_nats(self.nc)
        for pool in (self.pool, *self.more_pools):
            if pool is not None:
                await pool.close()
