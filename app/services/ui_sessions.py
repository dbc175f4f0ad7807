"""Dashboard sessions: an API key or the admin token, checked by the same rule as the API's bearer
token (services.auth.authenticate), exchanged for a random session token the browser keeps in a
cookie. Only the token's SHA-256 is stored. Each session carries its own CSRF token."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass

import asyncpg

from app.db import ui_sessions as session_repo
from app.errors import Unauthorized
from app.services.audit import Actor
from app.services.auth import ALL_SCOPES, KeyCache, Principal, authenticate, key_id_of

SESSION_SECONDS = 8 * 3600  # a working day; signing in again costs one paste of the key
LINK_SECONDS = 24 * 3600  # a one-time link `scheduler dev` prints stays good for its day
# token_urlsafe(32) is 43 characters; anything much longer is not one of ours and is not hashed.
MAX_TOKEN_CHARS = 64


@dataclass(frozen=True)
class UiSession:
    principal: Principal
    csrf_token: str
    # Names the session in the audit log: the first 16 hex digits of its token's SHA-256 (the
    # token cannot be had from it).
    id: str = ""

    def actor(self) -> Actor:
        """The session as the audit log records it, with the key it signed in with (None: the admin)."""
        return Actor("session", self.id, self.principal.key_id)


def _hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


async def _open(
    pool: asyncpg.Pool, kind: str, tenant_id: str | None, key_id: uuid.UUID | None, ttl: float
) -> str:
    token = secrets.token_urlsafe(32)
    async with pool.acquire() as conn:
        await session_repo.insert(conn, _hash(token), kind, tenant_id, key_id, secrets.token_urlsafe(32), ttl)
    return token


async def _principal_and_key(
    pool: asyncpg.Pool, keys: KeyCache, token: str, admin_token: str | None
) -> tuple[Principal, uuid.UUID | None]:
    principal = await authenticate(pool, keys, token, admin_token)
    return principal, None if principal.is_admin else key_id_of(token)


async def sign_in(pool: asyncpg.Pool, keys: KeyCache, token: str, admin_token: str | None) -> str:
    """A new session's token for whoever `token` (an API key or the admin token) authenticates."""
    principal, key_id = await _principal_and_key(pool, keys, token, admin_token)
    return await _open(pool, "session", principal.tenant_id, key_id, SESSION_SECONDS)


async def create_link(pool: asyncpg.Pool, keys: KeyCache, token: str, admin_token: str | None) -> str:
    """A one-time sign-in link's token for whoever `token` authenticates (`scheduler dev`)."""
    principal, key_id = await _principal_and_key(pool, keys, token, admin_token)
    return await _open(pool, "link", principal.tenant_id, key_id, LINK_SECONDS)


async def redeem_link(pool: asyncpg.Pool, link: str) -> str:
    """A new session's token for a link not used before and not expired; the link is spent."""
    row = None
    if len(link) <= MAX_TOKEN_CHARS:
        async with pool.acquire() as conn:
            row = await session_repo.take_link(conn, _hash(link))
    if row is None:
        raise Unauthorized("this sign-in link was used already or has expired", field="link")
    return await _open(pool, "session", row["tenant_id"], row["key_id"], SESSION_SECONDS)


async def get_session(pool: asyncpg.Pool, token: str) -> UiSession | None:
    """The live session of this token, or None (unknown, expired, signed out, its key revoked)."""
    if not token or len(token) > MAX_TOKEN_CHARS:
        return None
    token_hash = _hash(token)
    async with pool.acquire() as conn:
        row = await session_repo.get_session(conn, token_hash)
    if row is None:
        return None
    tenant_id = row["tenant_id"]
    # A tenant's session does what its key may (services.auth.Scope); the admin's, everything.
    scopes = ALL_SCOPES if tenant_id is None else frozenset(row["scopes"] or ())
    key_id = row["key_id"].hex if row["key_id"] is not None else None
    return UiSession(Principal(tenant_id, scopes, key_id), row["csrf_token"], token_hash.hex()[:16])


async def sign_out(pool: asyncpg.Pool, token: str) -> None:
    if token and len(token) <= MAX_TOKEN_CHARS:
        async with pool.acquire() as conn:
            await session_repo.delete_session(conn, _hash(token))
