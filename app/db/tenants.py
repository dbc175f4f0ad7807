"""Tenants and API keys."""

from __future__ import annotations

import uuid

import asyncpg

from app.db import queries as q


async def create_tenant(conn: asyncpg.Connection, tenant_id: str, signing_secret: str) -> bool:
    return await q.fetchrow(conn, "create_tenant", id=tenant_id, signing_secret=signing_secret) is not None


async def tenant_exists(conn: asyncpg.Connection, tenant_id: str) -> bool:
    return bool(await q.fetchval(conn, "tenant_exists", id=tenant_id))


async def insert_api_key(
    conn: asyncpg.Connection, key_id: uuid.UUID, tenant_id: str, salt: bytes, digest: bytes
) -> None:
    await q.execute(conn, "insert_api_key", id=key_id, tenant_id=tenant_id, salt=salt, hash=digest)


async def list_api_keys(conn: asyncpg.Connection, tenant_id: str) -> list[asyncpg.Record]:
    return await q.fetch(conn, "list_api_keys", tenant_id=tenant_id)


async def revoke_api_key(conn: asyncpg.Connection, tenant_id: str, key_id: uuid.UUID) -> bool:
    return await q.fetchrow(conn, "revoke_api_key", id=key_id, tenant_id=tenant_id) is not None


async def get_api_key(conn: asyncpg.Connection, key_id: uuid.UUID) -> asyncpg.Record | None:
    return await q.fetchrow(conn, "get_api_key", id=key_id)


async def get_signing_secrets(conn: asyncpg.Connection, tenant_ids: list[str]) -> dict[str, str]:
    rows = await q.fetch(conn, "get_signing_secrets", tenant_ids=tenant_ids)
    return {r["id"]: r["signing_secret"] for r in rows}
