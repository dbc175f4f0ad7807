"""The Redis hot index: a sorted set of due run ids scored by due time. A hint, never the truth.

Postgres decides: the engine claims exactly the popped ids under the same predicates as the scan,
so a stale id matches nothing. Every Redis failure is swallowed and counted; the caller falls back
to the scan, so Redis being down never stops dispatch."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any
from uuid import UUID

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from app.telemetry import metrics

log = logging.getLogger(__name__)

# Pop what is due, atomically, so two engines never pop the same hint.
_POP_DUE = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
if #ids > 0 then redis.call('ZREM', KEYS[1], unpack(ids)) end
return ids
"""


class HotIndex:
    def __init__(self, url: str, key: str):
        self.client: Any = aioredis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self.key = key
        self._pop = self.client.register_script(_POP_DUE)

    async def add(self, runs: Iterable[Any]) -> None:
        """Hint runs (rows with id and due_at); called after their insert or retry has committed."""
        mapping = {str(r["id"]): r["due_at"].timestamp() for r in runs}
        if not mapping:
            return
        try:
            await self.client.zadd(self.key, mapping)
        except (RedisError, OSError) as exc:
            metrics.hot_index_events_total.labels("error").inc()
            log.warning("hot index: add failed, the scan will find these runs: %s", exc)

    async def discard(self, run_ids: Iterable[Any]) -> None:
        """Forget hints of runs claimed by the scan, so they do not come back as stale pops."""
        members = [str(i) for i in run_ids]
        if not members:
            return
        try:
            await self.client.zrem(self.key, *members)
        except (RedisError, OSError) as exc:
            metrics.hot_index_events_total.labels("error").inc()
            log.warning("hot index: discard failed (the hints will be dropped as stale): %s", exc)

    async def pop_due(self, now: float, limit: int) -> list[UUID] | None:
        """Due ids, removed from the index; None when Redis failed (the caller scans instead)."""
        try:
            raw: Sequence[bytes] = await self._pop(keys=[self.key], args=[now, limit])
        except (RedisError, OSError) as exc:
            metrics.hot_index_events_total.labels("error").inc()
            log.warning("hot index: pop failed, falling back to the scan: %s", exc)
            return None
        return [UUID(r.decode()) for r in raw]

    async def close(self) -> None:
        await self.client.aclose()
