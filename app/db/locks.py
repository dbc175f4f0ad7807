"""Session advisory locks: one leader at a time for work that replicas must not do twice."""

from __future__ import annotations

import asyncpg

from app.db import queries as q

PARTITIONS_LOCK_KEY = 0x5C4ED01E  # partition maintenance
IDEMPOTENCY_PRUNE_LOCK_KEY = 0x5C4ED01F  # pruning expired idempotency keys
DEDUPE_SWEEP_LOCK_KEY = 0x5C4ED020  # sweeping unique and debounce keys that hold nothing


async def try_advisory_lock(conn: asyncpg.Connection, key: int) -> bool:
    return bool(await q.fetchval(conn, "try_advisory_lock", key=key))


async def advisory_unlock(conn: asyncpg.Connection, key: int) -> None:
    await q.execute(conn, "advisory_unlock", key=key)
