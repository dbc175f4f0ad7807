"""Tenants and API keys."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from app.db import queries as q


async def create_tenant(conn: asyncpg.Connection, tenant_id: str, signing_secret: str) -> bool:
    return await q.fetchrow(conn, "create_tenant", id=tenant_id, signing_secret=signing_secret) is not None


async def tenant_exists(conn: asyncpg.Connection, tenant_id: str) -> bool:
    return bool(await q.fetchval(conn, "tenant_exists", id=tenant_id))


async def insert_api_key(
    conn: asyncpg.Connection,
    key_id: uuid.UUID,
    tenant_id: str,
    salt: bytes,
    digest: bytes,
    scopes: list[str],
) -> None:
    await q.execute(
        conn, "insert_api_key", id=key_id, tenant_id=tenant_id, salt=salt, hash=digest, scopes=scopes
    )


async def list_api_keys(conn: asyncpg.Connection, tenant_id: str) -> list[asyncpg.Record]:
    return await q.fetch(conn, "list_api_keys", tenant_id=tenant_id)


async def revoke_api_key(conn: asyncpg.Connection, tenant_id: str, key_id: uuid.UUID) -> bool:
    return await q.fetchrow(conn, "revoke_api_key", id=key_id, tenant_id=tenant_id) is not None


async def get_api_key(conn: asyncpg.Connection, key_id: uuid.UUID) -> asyncpg.Record | None:
    return await q.fetchrow(conn, "get_api_key", id=key_id)


@dataclass(frozen=True)
class SigningSecrets:
    current: str
    previous: str | None  # only while its overlap lasts
    previous_valid_seconds: float | None  # how long it still does, by the database's clock


async def get_signing_secrets(conn: asyncpg.Connection, tenant_id: str) -> SigningSecrets | None:
    row = await q.fetchrow(conn, "get_signing_secrets", id=tenant_id)
    if row is None:
        return None
    return SigningSecrets(
        row["signing_secret"], row["previous_signing_secret"], row["previous_valid_seconds"]
    )


async def rotate_signing_secret(
    conn: asyncpg.Connection, tenant_id: str, signing_secret: str, overlap_seconds: float
) -> datetime | None:
    """The new secret becomes current; returns when the previous one expires (None: no such tenant)."""
    row = await q.fetchrow(
        conn,
        "rotate_signing_secret",
        id=tenant_id,
        signing_secret=signing_secret,
        overlap_seconds=overlap_seconds,
    )
    return None if row is None else row["previous_expires_at"]


async def list_tenants(conn: asyncpg.Connection, after: str, limit: int) -> list[asyncpg.Record]:
    return await q.fetch(conn, "list_tenants", after=after, limit=limit)
