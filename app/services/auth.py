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
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import asyncpg

from app.db import tenants as tenant_repo
from app.errors import Forbidden, NotFound, Unauthorized

KEY_PREFIX = "sch_"

# What a tenant's key may do: read or change runs, read or change jobs, manage the tenant's keys,
# signing secrets and audit log. A key holds one or more; the admin token holds every one.
Scope = Literal["runs:read", "runs:write", "jobs:read", "jobs:write", "tenant:admin"]
SCOPES: tuple[Scope, ...] = get_args(Scope)
ALL_SCOPES: frozenset[str] = frozenset(SCOPES)


@dataclass(frozen=True)
class Principal:
    """Who is calling: the admin (tenant_id None) or one tenant, by one of its keys (`key_id`, hex),
    with that key's scopes."""

    tenant_id: str | None
    scopes: frozenset[str] = field(default=ALL_SCOPES)
    key_id: str | None = None

    def can(self, scope: str) -> bool:
        return self.is_admin or scope in self.scopes

    def require_scope(self, scope: str) -> None:
        """403 naming the scope when the key lacks it. Called once the resource is known to be the
        caller's own (app.api.deps.authorize): another tenant's stays 404."""
        if not self.can(scope):
            raise Forbidden(f"this API key lacks the scope {scope}", field="Authorization")

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


async def issue_key(
    conn: asyncpg.Connection, tenant_id: str, scopes: tuple[str, ...] = SCOPES
) -> tuple[str, str]:
    """(key id, the key itself). The key is shown once; the id names it for listing and revoking."""
    key_id = uuid.uuid4()
    secret = secrets.token_urlsafe(32)
    salt = secrets.token_bytes(16)
    await tenant_repo.insert_api_key(conn, key_id, tenant_id, salt, _digest(salt, secret), list(scopes))
    return key_id.hex, f"{KEY_PREFIX}{key_id.hex}_{secret}"


@dataclass(frozen=True)
class KeyRow:
    tenant_id: str
    salt: bytes
    digest: bytes
    scopes: frozenset[str]  # a key's scopes never change after it is issued


class KeyCache:
    """Key rows (tenant, salt, hash, scopes) by key id, kept a few seconds so a client's request stream costs
    one lookup per key per TTL instead of one per request. Only what the database said is cached; the
    secret is still checked against the hash on every request, and a miss is never cached."""

    def __init__(self, ttl_seconds: float = 5.0, max_keys: int = 10_000):
        self.ttl_seconds = ttl_seconds
        self.max_keys = max_keys
        self._rows: dict[uuid.UUID, tuple[KeyRow, float]] = {}

    def forget(self, key_id: uuid.UUID) -> None:
        """A revoked key stops working here at once; other API processes drop it within the TTL."""
        self._rows.pop(key_id, None)

    async def get(
        self, key_id: uuid.UUID, load: Callable[[uuid.UUID], Awaitable[Mapping[str, Any] | None]]
    ) -> KeyRow | None:
        """The key's row: cached, else `load(key_id)` (the database's row or None)."""
        cached = self._rows.get(key_id)
        now = time.monotonic()
        if cached is not None and now - cached[1] < self.ttl_seconds:
            return cached[0]
        row = await load(key_id)
        if row is None:
            self._rows.pop(key_id, None)
            return None
        if len(self._rows) >= self.max_keys:
            self._rows.clear()  # crude but bounded; a refill costs one lookup per active key
        key = KeyRow(row["tenant_id"], row["salt"], row["hash"], frozenset(row["scopes"]))
        self._rows[key_id] = (key, now)
        return key


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
            if row is not None and hmac.compare_digest(_digest(row.salt, secret), row.digest):
                return Principal(row.tenant_id, row.scopes, key_id=key_id.hex)
    raise Unauthorized("invalid bearer token", field="Authorization")
