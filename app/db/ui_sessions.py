"""Dashboard sessions and one-time sign-in links (migration 0011), by the hash of their token."""

from __future__ import annotations

import uuid

import asyncpg

from app.db import queries as q


async def insert(
    conn: asyncpg.Connection,
    token_hash: bytes,
    kind: str,
    tenant_id: str | None,
    key_id: uuid.UUID | None,
    csrf_token: str,
    ttl_seconds: float,
) -> None:
    await q.execute(
        conn,
        "insert_ui_session",
        token_hash=token_hash,
        kind=kind,
        tenant_id=tenant_id,
        key_id=key_id,
        csrf_token=csrf_token,
        ttl_seconds=ttl_seconds,
    )


async def get_session(conn: asyncpg.Connection, token_hash: bytes) -> asyncpg.Record | None:
    return await q.fetchrow(conn, "get_ui_session", token_hash=token_hash)


async def take_link(conn: asyncpg.Connection, token_hash: bytes) -> asyncpg.Record | None:
    return await q.fetchrow(conn, "take_ui_link", token_hash=token_hash)


async def delete_session(conn: asyncpg.Connection, token_hash: bytes) -> None:
    await q.execute(conn, "delete_ui_session", token_hash=token_hash)
