"""A led service (app/background.py: Led) runs its step in one process at a time: the one that holds
its advisory lock; the other skips the step until the lock is free."""

from __future__ import annotations

import asyncio

import asyncpg

from app.background import Led

TEST_LOCK_KEY = 0x5C4ED0FF  # no service of the scheduler's uses it


class Holding(Led[str]):
    """Leads until told to let go."""

    name = "test-leader"
    leader = TEST_LOCK_KEY
    interval = 60.0

    def __init__(self, pool: asyncpg.Pool, who: str):
        self.pool = pool
        self.who = who
        self.leading = asyncio.Event()
        self.let_go = asyncio.Event()

    async def lead(self, conn: asyncpg.Connection) -> str:
        assert await conn.fetchval("SELECT 1") == 1  # its work runs on the lock's connection
        self.leading.set()
        await self.let_go.wait()
        return self.who


async def test_the_lock_is_held_by_one_of_two(pool: asyncpg.Pool) -> None:
    first, second = Holding(pool, "first"), Holding(pool, "second")
    leading = asyncio.create_task(first.step())
    await asyncio.wait_for(first.leading.wait(), 5)
    assert await second.step() is None  # the first holds the lock: the second skips its step
    assert not second.leading.is_set()
    first.let_go.set()
    assert await leading == "first"
    second.let_go.set()
    assert await second.step() == "second"  # released with the first's step: the second leads now
    async with pool.acquire() as conn:  # and let it go again
        held = await conn.fetchval(  # in this test's database: the server may serve other tests
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        assert held == 0
