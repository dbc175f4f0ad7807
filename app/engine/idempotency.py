"""Pruning idempotency keys: a key goes once its floor has passed and its run is gone or has been
finished for the grace period (docs/api.md: "Idempotency keys"). One engine at a time (an advisory
lock), a bounded DELETE per pass."""

from __future__ import annotations

import logging

import asyncpg

from app.background import Led
from app.config import Settings
from app.db import locks
from app.db import runs as run_repo
from app.services.run_requests import IDEMPOTENCY_GRACE_SECONDS

log = logging.getLogger(__name__)
KEYS_PER_PASS = 10_000


class IdempotencyKeyPruner(Led[int]):
    name = "idempotency_keys"
    leader = locks.IDEMPOTENCY_PRUNE_LOCK_KEY

    def __init__(self, settings: Settings, pool: asyncpg.Pool):
        self.settings = settings
        self.pool = pool
        self.interval = settings.maintenance_interval_seconds

    async def lead(self, conn: asyncpg.Connection) -> int:
        """Deletes expired keys; how many."""
        deleted = await run_repo.delete_expired_idempotency_keys(
            conn, IDEMPOTENCY_GRACE_SECONDS, KEYS_PER_PASS
        )
        if deleted:
            log.info("pruned %d expired idempotency keys", deleted)
        return deleted
