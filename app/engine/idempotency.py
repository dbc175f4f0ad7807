"""Pruning idempotency keys: a key goes once its floor has passed and its run is gone or has been
finished for the grace period (docs/api.md: "Idempotency keys"). One engine at a time (an advisory
lock), a bounded DELETE per pass."""

from __future__ import annotations

import asyncio
import logging

import asyncpg

from app.config import Settings
from app.db import locks
from app.db import runs as run_repo
from app.engine.loop import every
from app.services.run_requests import IDEMPOTENCY_GRACE_SECONDS

log = logging.getLogger(__name__)
KEYS_PER_PASS = 10_000


class IdempotencyKeyPruner:
    def __init__(self, settings: Settings, pool: asyncpg.Pool):
        self.settings = settings
        self.pool = pool

    async def prune_once(self) -> int:
        """Deletes expired keys; how many (0 also when another engine holds the lock)."""
        async with self.pool.acquire() as conn:
            if not await locks.try_advisory_lock(conn, locks.IDEMPOTENCY_PRUNE_LOCK_KEY):
                return 0
            try:
                deleted = await run_repo.delete_expired_idempotency_keys(
                    conn, IDEMPOTENCY_GRACE_SECONDS, KEYS_PER_PASS
                )
            finally:
                await locks.advisory_unlock(conn, locks.IDEMPOTENCY_PRUNE_LOCK_KEY)
        if deleted:
            log.info("pruned %d expired idempotency keys", deleted)
        return deleted

    async def run(self, stop: asyncio.Event) -> None:
        # As often as partition maintenance, which did this before it was a task of its own.
        await every(stop, self.settings.maintenance_interval_seconds, self.prune_once, "idempotency_keys")
