"""API keys and principals.

Keys are `sch_<key id>_<secret>`: the id finds the row, the secret is checked against a salted
HMAC-SHA256 in constant time. A 256-bit random secret cannot be guessed, so a slow password KDF
would only add latency to every request; the salt keeps equal hashes from revealing anything.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg

from app.db import tenants as tenant_repo
from app.errors import NotFound, Unauthorized

KEY_PREFIX = "sch_"


@dataclass(frozen=True)
class Principal:
    """Who is calling: the admin (tenant_id None) or one tenant, by one of its keys (`key_id`, hex)."""

    tenant_id: str | None
    key_id: str | None = None

    @property
    def is_admin(self) -> bool:
        return self.tenant_id is None

    def require_admin(self) -> None:
        if not self.is_admin:
            # A tenant key learns nothing about what the admin surface holds.
            raise NotFound("not found")

    def require_tenant(self, tenant_id: str) -> None:
        """A tenant key acts on its own tenant only; anything else is 404, never 403 (no existence leak)."""
        if self.tenant_id is not None and self.tenant_id != tenant_id:
            raise NotFound(f"tenant {tenant_id!r} not found", field="tenant_id")


def _digest(salt: bytes, secret: str) -> bytes:
    return hmac.new(salt, secret.encode(), hashlib.sha256).digest()


async def issue_key(conn: asyncpg.Connection, tenant_id: str) -> tuple[str, str]:
    """(key id, the key itself). The key is shown once; the id names it for listing and revoking."""
    key_id = uuid.uuid4()
    secret = secrets.token_urlsafe(32)
    salt = secrets.token_bytes(16)
    await tenant_repo.insert_api_key(conn, key_id, tenant_id, salt, _digest(salt, secret))
    return key_id.hex, f"{KEY_PREFIX}{key_id.hex}_{secret}"


class KeyCache:
    """Key rows (tenant, salt, hash) by key id, kept a few seconds so a client's request stream costs
    one lookup per key per TTL instead of one per request. Only what the database said is cached; the
    secret is still checked against the hash on every request, and a miss is never cached."""

    def __init__(self, ttl_seconds: float = 5.0, max_keys: int = 10_000):
        self.ttl_seconds = ttl_seconds
        self.max_keys = max_keys
        self._rows: dict[uuid.UUID, tuple[str, bytes, bytes, float]] = {}

    def forget(self, key_id: uuid.UUID) -> None:
        """A revoked key stops working here at once; other API processes drop it within the TTL."""
        self._rows.pop(key_id, None)

    async def get(
        self, key_id: uuid.UUID, load: Callable[[uuid.UUID], Awaitable[Mapping[str, Any] | None]]
    ) -> tuple[str, bytes, bytes] | None:
        """The key's (tenant, salt, hash): cached, else `load(key_id)` (the database's row or None)."""
        cached = self._rows.get(key_id)
        now = time.monotonic()
        if cached is not None and now - cached[3] < self.ttl_seconds:
            return cached[:3]
        row = await load(key_id)
        if row is None:
            self._rows.pop(key_id, None)
            return None
        if len(self._rows) >= self.max_keys:
            self._rows.clear()  # crude but bounded; a refill costs one lookup per active key
        self._rows[key_id] = (row["tenant_id"], row["salt"], row["hash"], now)
        return row["tenant_id"], row["salt"], row["hash"]


async def _api_key(pool: asyncpg.Pool, key_id: uuid.UUID) -> asyncpg.Record | None:
    async with pool.acquire() as conn:
        return await tenant_repo.get_api_key(conn, key_id)


def key_id_of(token: str) -> uuid.UUID | None:
    """The key id a `sch_<key id>_<secret>` token names (not yet checked), or None."""
    if not token.startswith(KEY_PREFIX):
        return None
    try:
        return uuid.UUID(hex=token.removeprefix(KEY_PREFIX).partition("_")[0])
    except ValueError:
        return None


async def authenticate(
    pool: asyncpg.Pool, keys: KeyCache, token: str | None, admin_token: str | None
) -> Principal:
    if not token:
        raise Unauthorized("missing bearer token", field="Authorization")
    if admin_token and hmac.compare_digest(token.encode(), admin_token.encode()):
        return Principal(tenant_id=None)
    key_id = key_id_of(token)
    if key_id is not None:
        secret = token.removeprefix(KEY_PREFIX).partition("_")[2]
        if secret:
            row = await keys.get(key_id, functools.partial(_api_key, pool))
            if row is not None and hmac.compare_digest(_digest(row[1], secret), row[2]):
                return Principal(tenant_id=row[0], key_id=key_id.hex)
    raise Unauthorized("invalid bearer token", field="Authorization")
