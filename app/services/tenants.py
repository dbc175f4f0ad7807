"""Tenants, their API keys and their webhook signing secrets."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from app.db import tenants as tenant_repo
from app.errors import Conflict, NotFound
from app.services import audit as audit_log
from app.services.audit import AuditContext
from app.services.auth import SCOPES, KeyCache, issue_key
from app.services.signing import new_signing_secret


@dataclass(frozen=True)
class NewTenant:
    id: str
    key_id: str
    api_key: str  # shown once
    signing_secret: str  # shown once


@dataclass(frozen=True)
class KeyInfo:
    key_id: str
    created_at: datetime
    revoked_at: datetime | None
    scopes: tuple[str, ...]


def _no_tenant(tenant_id: str) -> NotFound:
    return NotFound(f"tenant {tenant_id!r} not found", field="tenant_id")


async def create_tenant(pool: asyncpg.Pool, tenant_id: str, *, audit: AuditContext) -> NewTenant:
    """The tenant, its first API key and its signing secret, in one transaction."""
    secret = new_signing_secret()
    async with pool.acquire() as conn, conn.transaction():
        if not await tenant_repo.create_tenant(conn, tenant_id, secret):
            raise Conflict(f"tenant {tenant_id!r} already exists", field="id")
        key_id, key = await issue_key(conn, tenant_id)
        await audit_log.record(
            conn, audit, tenant_id, "tenant.created", f"tenant:{tenant_id}", {"key_id": key_id}
        )
    return NewTenant(tenant_id, key_id, key, secret)


async def issue_api_key(
    pool: asyncpg.Pool, tenant_id: str, scopes: tuple[str, ...] = SCOPES, *, audit: AuditContext
) -> tuple[str, str]:
    """(key id, key) of another key for the tenant, holding `scopes` (checked by the caller against
    auth.SCOPES and its own); earlier keys keep working until revoked."""
    async with pool.acquire() as conn, conn.transaction():
        if not await tenant_repo.tenant_exists(conn, tenant_id):
            raise _no_tenant(tenant_id)
        key_id, key = await issue_key(conn, tenant_id, scopes)
        await audit_log.record(
            conn, audit, tenant_id, "key.created", f"key:{key_id}", {"scopes": list(scopes)}
        )
    return key_id, key


async def list_api_keys(pool: asyncpg.Pool, tenant_id: str) -> list[KeyInfo]:
    """The tenant's keys, oldest first, revoked ones included (never their secrets)."""
    async with pool.acquire() as conn:
        if not await tenant_repo.tenant_exists(conn, tenant_id):
            raise _no_tenant(tenant_id)
        rows = await tenant_repo.list_api_keys(conn, tenant_id)
    return [KeyInfo(r["id"].hex, r["created_at"], r["revoked_at"], tuple(r["scopes"])) for r in rows]


async def revoke_api_key(
    pool: asyncpg.Pool, keys: KeyCache, tenant_id: str, key_id: uuid.UUID, *, audit: AuditContext
) -> None:
    """Revokes the key; this process's cache forgets it at once (the others within their TTL)."""
    async with pool.acquire() as conn, conn.transaction():
        if not await tenant_repo.revoke_api_key(conn, tenant_id, key_id):
            raise NotFound(f"key {key_id.hex} not found", field="key_id")
        await audit_log.record(conn, audit, tenant_id, "key.revoked", f"key:{key_id.hex}")
    keys.forget(key_id)


async def rotate_signing_secret(
    pool: asyncpg.Pool, tenant_id: str, overlap_seconds: float, *, audit: AuditContext
) -> tuple[str, datetime]:
    """(the new secret, when the previous one expires)."""
    secret = new_signing_secret()
    async with pool.acquire() as conn, conn.transaction():
        expires_at = await tenant_repo.rotate_signing_secret(conn, tenant_id, secret, overlap_seconds)
        if expires_at is None:
            raise _no_tenant(tenant_id)
        await audit_log.record(
            conn,
            audit,
            tenant_id,
            "signing_secret.rotated",
            f"tenant:{tenant_id}",
            {"overlap_seconds": overlap_seconds, "previous_expires_at": expires_at.isoformat()},
        )
    return secret, expires_at


@dataclass(frozen=True)
class TenantInfo:
    id: str
    created_at: datetime
    keys: list[KeyInfo]
    paused: bool = False


async def list_tenants(pool: asyncpg.Pool, after: str | None, limit: int) -> list[TenantInfo]:
    """Tenants by id from after `after`, each with its keys (ids and dates, never secrets)."""
    async with pool.acquire() as conn:
        rows = await tenant_repo.list_tenants(conn, after or "", limit)
    return [
        TenantInfo(
            r["id"],
            r["created_at"],
            [
                KeyInfo(
                    k["key_id"],
                    datetime.fromisoformat(k["created_at"]),
                    _moment(k["revoked_at"]),
                    tuple(k["scopes"]),
                )
                for k in r["keys"]
            ],
            r["paused"],
        )
        for r in rows
    ]


def _moment(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)
