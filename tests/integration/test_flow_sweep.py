"""The keeper's sweep (issue 17): flow control's bookkeeping of keys nothing uses any more goes, so a
tenant naming a key per customer cannot grow it without bound — and nothing a limit still needs goes
with it. Real Postgres."""

from __future__ import annotations

import asyncpg
import httpx

from app.config import Settings
from app.db import transitions
from app.db.connection import create_pool
from app.db.transitions import Fence
from app.engine.claims import claim_scan
from app.engine.expiry import RunExpiry
from app.engine.floor import ClaimBounds
from app.engine.keeper import FlowKeeper
from app.engine.reaper import Reaper
from tests.support import put_job, submit_run


async def slot_keys(pool: asyncpg.Pool) -> set[str]:
    return {
        r["key"] for r in await pool.fetch("SELECT key FROM concurrency_slots WHERE job = 'per-customer'")
    }


async def test_unused_keys_are_swept_and_keys_in_use_stay(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "per-customer", auth, concurrency={"limit": 1, "key": "payload.customer"})
    for c in range(30):
        await submit_run(api, "acme", auth, job="per-customer", payload={"customer": f"c{c}"})
    for _ in range(2):  # one holds the key's slot, the other waits for it
        await submit_run(api, "acme", auth, job="per-customer", payload={"customer": "busy"})
    keeper = FlowKeeper(settings, pool)
    assert await keeper.step() == 31
    async with pool.acquire() as conn:
        claimed = await claim_scan(conn, settings, ClaimBounds())
        assert len(claimed) == 31
        # c0 runs on (it holds its slot); every other granted run ends at once (a noop's start).
        running = [r for r in claimed if r["payload_json"] == '{"customer": "c0"}']
        done = [r for r in claimed if r not in running]
        for rows, inline in ((running, False), (done, True)):
            fence = Fence([(r["id"], r["scheduled_at"], r["epoch"]) for r in rows])
            assert len(
                await transitions.start_runs(conn, fence, [inline] * len(rows), owner="w", lease_seconds=30)
            ) == len(rows)
    assert await slot_keys(pool) == {f"c{c}" for c in range(30)} | {"busy"}

    await keeper.sweep()
    # c0: its run holds the slot; busy: its second run waits for it. Every other key is unused.
    assert await slot_keys(pool) == {"c0", "busy"}

    # A swept key is limited as before: its lock row is made again when a run waits for it.
    for _ in range(2):
        await submit_run(api, "acme", auth, job="per-customer", payload={"customer": "c7"})
    assert await keeper.step() == 2  # one of c7's, and busy's waiting run (its slot was freed)
    assert "c7" in await slot_keys(pool)
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM job_runs WHERE held = 'concurrency' AND concurrency_key = 'c7'"
        )
        == 1
    )


async def test_a_key_being_granted_is_not_swept(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "per-customer", auth, concurrency={"limit": 1, "key": "payload.customer"})
    await submit_run(api, "acme", auth, job="per-customer", payload={"customer": "c1"})
    keeper = FlowKeeper(settings, pool)
    assert await keeper.step() == 1
    async with pool.acquire() as conn:
        [run] = await claim_scan(conn, settings, ClaimBounds())
        fence = Fence([(run["id"], run["scheduled_at"], run["epoch"])])
        await transitions.start_runs(conn, fence, [True], owner="w", lease_seconds=30)
    async with pool.acquire() as granter, granter.transaction():
        # Another engine's keeper holds the key's row, as it does while it grants.
        await granter.execute("SELECT 1 FROM concurrency_slots WHERE key = 'c1' FOR UPDATE")
        await keeper.sweep()
        assert await slot_keys(pool) == {"c1"}
    await keeper.sweep()
    assert await slot_keys(pool) == set()


async def test_window_rows_go_once_they_left_the_window(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "limited", auth, rate_limit={"limit": 5, "period_seconds": 60})
    await put_job(api, "acme", "was-limited", auth)
    await pool.execute(
        """
        INSERT INTO rate_limit_starts (run_id, tenant_id, job, key, granted_at, started_at)
        VALUES (gen_random_uuid(), 'acme', 'limited', 'old', now() - interval '2 min', now() - interval '2 min'),
               (gen_random_uuid(), 'acme', 'limited', 'recent', now() - interval '10 s', now() - interval '10 s'),
               (gen_random_uuid(), 'acme', 'limited', 'not-started', now() - interval '2 min', NULL),
               (gen_random_uuid(), 'acme', 'was-limited', 'any', now() - interval '1 s', now() - interval '1 s'),
               (gen_random_uuid(), 'acme', 'was-limited', 'to-start', now() - interval '1 s', NULL),
               (gen_random_uuid(), 'acme', 'deleted-job', 'any', now() - interval '1 s', now() - interval '1 s')
        """
    )
    await FlowKeeper(settings, pool).sweep()
    left = {(r["job"], r["key"]) for r in await pool.fetch("SELECT job, key FROM rate_limit_starts")}
    # Within the period (10 s of 60) a start still counts; a granted run not started yet counts as
    # starting now (should its job be limited again before it starts). Older starts, and those of
    # jobs without a rate limit, count nowhere.
    assert left == {("limited", "recent"), ("limited", "not-started"), ("was-limited", "to-start")}


async def test_the_engines_polls_that_name_no_day_plan_once_a_connection(
    api: httpx.AsyncClient, tenant: dict, settings: Settings
) -> None:
    # A key with runs waiting, so the keeper's read finds something and the grant follows it.
    await put_job(api, "acme", "limited", tenant["auth"], concurrency={"limit": 1})
    for _ in range(3):
        await submit_run(api, "acme", tenant["auth"], job="limited")
    pool = await create_pool(settings.database_url, max_size=1)  # the polls' one connection
    try:
        keeper, reaper, expiry = FlowKeeper(settings, pool), Reaper(settings, pool), RunExpiry(settings, pool)
        assert await keeper.step() == 1
        assert await keeper.step() == 0  # the key's one slot is taken: nothing more to grant
        for _ in range(2):
            assert await reaper.step() == 0 and await expiry.step() == 0
        async with pool.acquire() as conn:
            plans = {
                r["name"]: (r["generic_plans"], r["custom_plans"])
                for r in await conn.fetch(
                    "SELECT CASE WHEN statement LIKE '%WITH RECURSIVE keys AS%' THEN 'waiting keys'"
                    "            WHEN statement LIKE '%state = scheduler_queue_dispatched() AND%'"
                    "                 THEN 'reap dispatched'"
                    "            WHEN statement LIKE '%state IN (scheduler_queue_dispatched(), scheduler_queue_running())%'"
                    "                 THEN 'reap running'"
                    "            WHEN statement LIKE '%WITH due AS%expires_at <= now()%' THEN 'expire' END AS name,"
                    "       generic_plans, custom_plans"
                    " FROM pg_prepared_statements WHERE statement NOT LIKE '%pg_prepared%'"
                )
                if r["name"] is not None
            }
            # Made once, then kept: two reads of waiting keys a pass (a slot's, a window's), two passes.
            assert plans == {
                "waiting keys": (4, 0),
                "reap dispatched": (2, 0),
                "reap running": (2, 0),
                "expire": (2, 0),
            }
            # Only inside their own transactions: every other statement is planned anew.
            assert await conn.fetchval("SHOW plan_cache_mode") == "force_custom_plan"
    finally:
        await pool.close()
