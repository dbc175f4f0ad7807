"""KeyCache: what the database said is kept for the TTL; a miss never is; forget() acts at once."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from app.services.auth import KeyCache, KeyRow

SCOPES = frozenset({"runs:read"})


def row(tenant: str) -> KeyRow:
    return KeyRow(tenant, b"s", b"h", SCOPES)


class Keys:
    """The api_keys table as the loader sees it, and how often it was read."""

    def __init__(self) -> None:
        self.rows: dict[uuid.UUID, dict[str, Any]] = {}
        self.reads = 0

    async def load(self, key_id: uuid.UUID) -> Mapping[str, Any] | None:
        self.reads += 1
        return self.rows.get(key_id)

    def add(self, tenant: str) -> uuid.UUID:
        key_id = uuid.uuid4()
        self.rows[key_id] = {"tenant_id": tenant, "salt": b"s", "hash": b"h", "scopes": ["runs:read"]}
        return key_id


async def test_a_found_key_is_cached_for_the_ttl() -> None:
    keys, cache = Keys(), KeyCache(ttl_seconds=0.2)
    key = keys.add("acme")
    assert await cache.get(key, keys.load) == row("acme")
    assert await cache.get(key, keys.load) == row("acme")
    assert keys.reads == 1
    time.sleep(0.21)
    del keys.rows[key]  # revoked in another process: gone here once the TTL has passed
    assert await cache.get(key, keys.load) is None
    assert keys.reads == 2


async def test_a_miss_is_never_cached() -> None:
    keys, cache = Keys(), KeyCache()
    key = uuid.uuid4()
    assert await cache.get(key, keys.load) is None
    keys.rows[key] = {"tenant_id": "late", "salt": b"s", "hash": b"h", "scopes": ["runs:read"]}
    assert await cache.get(key, keys.load) == row("late")
    assert keys.reads == 2


async def test_forget_drops_a_key_at_once() -> None:
    keys, cache = Keys(), KeyCache(ttl_seconds=60)
    key = keys.add("acme")
    await cache.get(key, keys.load)
    cache.forget(key)
    del keys.rows[key]
    assert await cache.get(key, keys.load) is None


async def test_the_cache_is_bounded() -> None:
    keys, cache = Keys(), KeyCache(ttl_seconds=60, max_keys=3)
    ids = [keys.add(f"t{i}") for i in range(10)]
    for key in ids:
        await cache.get(key, keys.load)
    reads = keys.reads
    assert await cache.get(ids[-1], keys.load) == row("t9")  # the newest is still cached
    assert keys.reads == reads
    assert await cache.get(ids[0], keys.load) == row("t0")  # the oldest was let go
    assert keys.reads == reads + 1
