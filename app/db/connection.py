"""Connection pools. Every connection uses custom plans: a generic plan of a partitioned-table query
locks every partition (DEFAULT included), so a claim transaction would block partition DDL. And the
claim's generic plan, blind to its floor and ceiling, walked the `live` index over that range and
sorted every pending run to take a batch: 12 ms a claim became 35 to 50 ms over a 20k backlog once a
connection without this setting had run it five times (auto_explain; docs/bench.md verdict 30).
The one exception is a statement that names no day, whose every plan holds every day anyway: it may
run in `planned_generically`, and keep the plan its connection made of it first. The engine's polls
do (the keeper's read of waiting keys, the reapers, the expiry sweep): planned anew, each cost 3.4 to
4 ms with a month of days, several times a second, busy or idle (verdict 41).

And every connection plans with random_page_cost 1.1 (SSD and cached data; Postgres's default of 4
prices a spinning disk). The scheduler's statements are index probes into a hot working set; under
the default the planner joined a claim's chosen rows back to today's partition by hashing a
sequential scan of all of it: 34 of the claim's 39 ms at 50k rows in the partition, 5 ms in all
with the probes (measured with EXPLAIN ANALYZE; the `steady` bench found it).

The URL may name several servers, libpq's way (`postgresql://app@db1:5432,db2:5432/scheduler`):
asyncpg tries them in order and keeps the first that accepts writes (`target_session_attrs`,
`read-write` unless the URL says otherwise), so after a failover every new connection finds the new
primary by itself. A connection attempt is bounded by CONNECT_TIMEOUT_SECONDS, every host included:
while no server is the primary, a request waits that long at most, then gets its 503. A connection
whose server turned read-only under it (a fenced old primary: `default_transaction_read_only` set
and reloaded) is closed at the first write it refuses (25006), so the pool connects anew, to the
primary, instead of handing out that connection again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlencode

import asyncpg
import orjson
from asyncpg.pool import PoolAcquireContext

from app.db import queries as q

SERVER_SETTINGS = {
    "plan_cache_mode": "force_custom_plan",
    "random_page_cost": "1.1",
    "application_name": "scheduler",
}
# asyncpg's own default is 60 s: a host that drops packets would hold every request that long.
CONNECT_TIMEOUT_SECONDS = 5.0
DEFAULT_PORT = "5432"


def _split(database_url: str) -> tuple[str, str, list[str], str, str]:
    """scheme, user info (with its '@', or ''), hosts, path, query of a libpq URL; hosts as written
    ('db1:5432'), several when the URL names several."""
    scheme, rest = database_url.split("://", 1)
    rest, _, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    userinfo, at, hostlist = netloc.rpartition("@")  # a password may hold '@' only escaped
    return scheme, userinfo + at, [h for h in hostlist.split(",") if h], slash + path, query


def writable_dsn(database_url: str) -> str:
    """A URL naming several servers asks for the one that accepts writes unless it says otherwise:
    every process writes, and libpq's default (`any`) would keep a standby that happened to answer
    first. One server: unchanged."""
    scheme, userinfo, hosts, path, query = _split(database_url)
    if len(hosts) < 2 or "target_session_attrs" in dict(parse_qsl(query)):
        return database_url
    query = "&".join(q for q in (query, "target_session_attrs=read-write") if q)
    return f"{scheme}://{userinfo}{','.join(hosts)}{path}?{query}"


def sqlalchemy_url(database_url: str | None) -> str:
    """The URL for SQLAlchemy's asyncpg dialect (alembic). Several servers travel as its multi-host
    form, `?host=db1:5432&host=db2:5432` (each with its port: the dialect requires one per host)."""
    if database_url is None:
        from app.config import get_settings

        database_url = get_settings().database_url
    if not database_url:
        raise RuntimeError("SCHEDULER_DATABASE_URL is not set")
    database_url = writable_dsn(database_url)
    _, userinfo, hosts, path, query = _split(database_url)
    if len(hosts) < 2:
        return "postgresql+asyncpg://" + database_url.split("://", 1)[1]
    pairs = [("host", h if ":" in h else f"{h}:{DEFAULT_PORT}") for h in hosts]
    pairs += parse_qsl(query, keep_blank_values=True)
    return f"postgresql+asyncpg://{userinfo}{path or '/'}?{urlencode(pairs, safe=':/')}"


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


async def _init(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("jsonb", encoder=_dumps, decoder=orjson.loads, schema="pg_catalog")
    await conn.set_type_codec("json", encoder=_dumps, decoder=orjson.loads, schema="pg_catalog")


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Release without the server-side reset (UNLISTEN, RESET ALL, …): one round trip per request
    saved. asyncpg still rolls back an open transaction and drops client-side listeners first."""


class _Acquired(PoolAcquireContext):  # type: ignore[misc]
    __slots__ = ()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_val: BaseException | None = None,
        exc_tb: TracebackType | None = None,
    ) -> None:
        if isinstance(exc_val, asyncpg.ReadOnlySQLTransactionError) and self.connection is not None:
            self.connection.terminate()  # released closed: the pool replaces it with a new one
        await super().__aexit__(exc_type, exc_val, exc_tb)


class Pool(asyncpg.Pool):  # type: ignore[misc]
    """asyncpg's pool, but a connection that met a read-only server is not used again."""

    __slots__ = ()

    def acquire(self, *, timeout: float | None = None) -> PoolAcquireContext:
        return _Acquired(self, timeout)


async def create_pool(
    dsn: str, *, min_size: int = 1, max_size: int = 10, name: str = "scheduler", session_state: bool = True
) -> asyncpg.Pool:
    """`session_state=False` for pools whose users never leave session state behind (no SET, LISTEN
    or advisory lock outside a transaction): the API's."""
    pool = Pool(
        writable_dsn(dsn),
        timeout=CONNECT_TIMEOUT_SECONDS,
        min_size=min_size,
        max_size=max_size,
        # asyncpg.create_pool's defaults, which Pool itself requires.
        max_queries=50000,
        max_inactive_connection_lifetime=300.0,
        loop=None,
        connection_class=asyncpg.Connection,
        record_class=asyncpg.Record,
        init=_init,
        reset=None if session_state else _keep_session,
        server_settings={**SERVER_SETTINGS, "application_name": name},
        command_timeout=60,
    )
    await pool
    return pool


async def connect(dsn: str, *, name: str = "scheduler") -> asyncpg.Connection:
    conn = await asyncpg.connect(
        writable_dsn(dsn),
        timeout=CONNECT_TIMEOUT_SECONDS,
        server_settings={**SERVER_SETTINGS, "application_name": name},
    )
    await _init(conn)
    return conn


@asynccontextmanager
async def planned_generically(conn: asyncpg.Connection) -> AsyncIterator[None]:
    """A transaction whose statements keep the plan `conn` made of them first (connection.sql): only
    for statements that name no day."""
    async with conn.transaction():
        await q.execute(conn, "plan_generically")
        yield
