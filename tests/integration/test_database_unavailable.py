"""While no server accepts writes — a failover between the old primary's loss and the new one's
promotion, or a connection that reached a server turned standby — the API answers 503 problem
details with Retry-After, never 500; once writes are accepted again, a client that retries its
submission with the same Idempotency-Key gets exactly one run.

A real server made read-only (default_transaction_read_only for the test's database) stands for the
standby: a write there fails as on a standby, with read_only_sql_transaction (25006). The failover
itself, with Patroni, is tests/faults/test_postgres_failover.py."""

from __future__ import annotations

from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest

from app.config import Settings
from app.db.connection import create_pool
from tests.support import Services, count_rows


async def _sessions_anew(admin: asyncpg.Connection, database: str) -> None:
    """Ends every session of the database, waiting until each is gone (a terminated backend may still
    answer a moment, and takes seconds to exit on cores the suite's parallel workers share): the API's
    pool connects anew, under the new default."""
    ended = await admin.fetch(
        "SELECT pg_terminate_backend(pid, 60000) AS gone FROM pg_stat_activity"
        " WHERE datname = $1 AND pid <> pg_backend_pid()",
        database,
    )
    assert all(r["gone"] for r in ended), "a session outlived its termination"


async def test_no_writable_server_is_a_503_and_the_retry_makes_one_run(
    services: Services,
    settings: Settings,
    api: httpx.AsyncClient,
    tenant: dict[str, object],
    pool: asyncpg.Pool,
) -> None:
    auth = tenant["auth"]
    assert isinstance(auth, dict) and settings.database_url
    database = urlsplit(settings.database_url).path.lstrip("/")  # the host may be a socket's path
    headers = {**auth, "Idempotency-Key": "failover-1"}
    admin = await asyncpg.connect(services.postgres_url)
    try:
        await admin.execute(f'ALTER DATABASE "{database}" SET default_transaction_read_only = on')
        await _sessions_anew(admin, database)
        for _ in range(3):
            r = await api.post("/tenants/acme/runs", json={"job": "hello"}, headers=headers)
            assert r.status_code == 503, r.text
            assert r.headers["content-type"] == "application/problem+json"
            assert r.headers["retry-after"].isdigit()
            assert r.json()["code"] == "unavailable" and r.json()["status"] == 503
        # Reads still work on a standby: only what writes is refused.
        r = await api.get("/tenants/acme/runs", headers=auth)
        assert r.status_code == 200, r.text
        await admin.execute(f'ALTER DATABASE "{database}" RESET default_transaction_read_only')
        await _sessions_anew(admin, database)
    finally:
        await admin.execute(f'ALTER DATABASE "{database}" RESET default_transaction_read_only')
        await admin.close()
    first = await api.post("/tenants/acme/runs", json={"job": "hello"}, headers=headers)
    assert first.status_code == 201, first.text
    again = await api.post("/tenants/acme/runs", json={"job": "hello"}, headers=headers)
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert await count_rows(pool, "job_runs") == 1


async def test_a_connection_whose_server_turned_read_only_is_not_used_again(settings: Settings) -> None:
    """A fenced old primary (default_transaction_read_only set and reloaded) refuses every write of
    the sessions it still has: the pool must connect anew rather than hand that connection out again.
    One session made read-only stands for it (the API's pool keeps session state across releases)."""
    assert settings.database_url
    pool = await create_pool(settings.database_url, min_size=1, max_size=1, session_state=False)
    try:
        async with pool.acquire() as conn:
            await conn.execute("SET default_transaction_read_only = on")
            fenced = conn.get_server_pid()
        with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
            await pool.execute("CREATE TABLE read_only_probe (i int)")
        async with pool.acquire() as conn:
            assert conn.get_server_pid() != fenced
            await conn.execute("CREATE TABLE read_only_probe (i int)")
    finally:
        await pool.close()
