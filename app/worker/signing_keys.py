"""The worker's per-tenant cache of webhook signing keys, coherent with rotation.

An entry lives `signing_secret_cache_seconds` (default 10 s), so a rotation reaches every worker
within that long: until then a worker may still sign with the old secret alone, which receivers
accept throughout the overlap. An entry holding a previous secret also ends when that secret's
overlap does (the remaining time is the database's reckoning, not this node's clock), so no worker
signs with a retired secret.
"""

from __future__ import annotations

import time

import asyncpg

from app.db import tenants as tenant_repo
from app.services.signing import signing_key


class UnknownTenant(LookupError):
    pass


class SigningKeys:
    def __init__(self, pool: asyncpg.Pool, ttl_seconds: float):
        self.pool = pool
        self.ttl = ttl_seconds
        self._cache: dict[str, tuple[list[bytes], float]] = {}  # tenant -> (keys, monotonic expiry)

    async def get(self, tenant_id: str) -> list[bytes]:
        """The tenant's valid keys, newest first."""
        cached = self._cache.get(tenant_id)
        if cached is not None and time.monotonic() < cached[1]:
            return cached[0]
        async with self.pool.acquire() as conn:
            row = await tenant_repo.get_signing_secrets(conn, tenant_id)
        if row is None:
            self._cache.pop(tenant_id, None)
            raise UnknownTenant(tenant_id)
        keys = [signing_key(row.current)]
        lifetime = self.ttl
        if row.previous is not None and row.previous_valid_seconds is not None:
            keys.append(signing_key(row.previous))
            lifetime = min(lifetime, row.previous_valid_seconds)
        self._cache[tenant_id] = (keys, time.monotonic() + lifetime)
        return keys
