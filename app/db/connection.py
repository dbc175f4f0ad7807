"""Connection pools. Every connection uses custom plans: a generic plan of a partitioned-table query
locks every partition (DEFAULT included), so a claim transaction would block partition DDL. And the
claim's generic plan, blind to its floor and ceiling, walked the `live` index over that range and
sorted every pending run to take a batch: 12 ms a claim became 35 to 50 ms over a 20k backlog once a
connection without this setting had run it five times (auto_explain; docs/bench.md verdict 30).

And every connection plans with random_page_cost 1.1 (SSD and cached data; Postgres's default of 4
prices a spinning disk). The scheduler's statements are index probes into a hot working set; under
the default the planner joined a claim's chosen rows back to today's partition by hashing a
sequential scan of all of it: 34 of the claim's 39 ms at 50k rows in the partition, 5 ms in all
with the probes (measured with EXPLAIN ANALYZE; the `steady` bench found it)."""

from __future__ import annotations

from typing import Any

import asyncpg
import orjson

SERVER_SETTINGS = {
    "plan_cache_mode": "force_custom_plan",
    "random_page_cost": "1.1",
    "application_name": "scheduler",
}


def sqlalchemy_url(database_url: str | None) -> str:
    if database_url is None:
        from app.config import get_settings

        database_url = get_settings().database_url
    if not database_url:
        raise RuntimeError("SCHEDULER_DATABASE_URL is not set")
    return "postgresql+asyncpg://" + database_url.split("://", 1)[1]


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


async def _init(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("jsonb", encoder=_dumps, decoder=orjson.loads, schema="pg_catalog")
    await conn.set_type_codec("json", encoder=_dumps, decoder=orjson.loads, schema="pg_catalog")


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Release without the server-side reset (UNLISTEN, RESET ALL, …): one round trip per request
    saved. asyncpg still rolls back an open transaction and drops client-side listeners first."""


async def create_pool(
    dsn: str, *, min_size: int = 1, max_size: int = 10, name: str = "scheduler", session_state: bool = True
) -> asyncpg.Pool:
    """`session_state=False` for pools whose users never leave session state behind (no SET, LISTEN
    or advisory lock outside a transaction): the API's."""
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=_init,
        reset=None if session_state else _keep_session,
        server_settings={**SERVER_SETTINGS, "application_name": name},
        command_timeout=60,
    )
    assert pool is not None
    return pool


async def connect(dsn: str, *, name: str = "scheduler") -> asyncpg.Connection:
    conn = await asyncpg.connect(dsn, server_settings={**SERVER_SETTINGS, "application_name": name})
    await _init(conn)
    return conn
