"""A dependent's release against real Postgres, where it meets the rest: a dependent of a
concurrency-limited job is released by its parent's success into the wait for its slot (the flow
trigger lets the release through, the limit still holds: it runs only once the keeper grants it a
slot); and two parents finishing at the same time, in separate transactions on separate
connections, release their shared dependents exactly once, without a deadlock. A submission naming
both a parent and its pending child, while that parent ends, can close a lock cycle with the end:
Postgres fails one side, and the submission is tried again (the last test)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx

from app.config import Settings
from app.db import transitions
from app.engine.claims import claim_scan
from app.engine.floor import ClaimBounds
from app.engine.keeper import FlowKeeper
from tests.integration.test_run_dependencies import batch
from tests.integration.test_run_history import Outcome, fence_of
from tests.support import put_job, submit_run

CHILD = (
    "SELECT status, held, parents_waiting, due_at = 'infinity' AS unclaimable, held_due_at IS NOT NULL AS kept"
    " FROM job_runs WHERE id = $1"
)


async def claim_and_start(pool: asyncpg.Pool, settings: Settings) -> dict[str, asyncpg.Record]:
    """Every run claimable now, claimed and started; by id."""
    async with pool.acquire() as conn:
        claimed = await claim_scan(conn, settings, ClaimBounds())
        if claimed:
            assert await transitions.start_runs(
                conn, fence_of(claimed), [False] * len(claimed), owner="w1", lease_seconds=30
            )
    return {str(r["id"]): r for r in claimed}


async def succeed(conn: asyncpg.Connection, *runs: asyncpg.Record) -> None:
    assert len(
        await transitions.finish_runs(conn, fence_of(list(runs)), [Outcome(ok=True)] * len(runs))
    ) == len(runs)


async def holders(pool: asyncpg.Pool) -> list[str]:
    return [str(r["run_id"]) for r in await pool.fetch("SELECT run_id FROM concurrency_holders")]


async def test_a_dependent_of_a_limited_job_is_released_into_the_wait_for_its_slot(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "one", auth, concurrency={"limit": 1})
    blocker = await submit_run(api, "acme", auth, job="one")
    r = await batch(api, auth, [{"job": "hello", "ref": "p"}, {"job": "one", "depends_on": ["p"]}])
    parent, child = r.json()["runs"]
    assert child["held"] == "dependencies"
    keeper = FlowKeeper(settings, pool)
    # The one slot goes to the blocker: the child waits for its parent, not for a slot.
    assert await keeper.step() == 1 and await holders(pool) == [blocker["id"]]
    started = await claim_and_start(pool, settings)
    assert set(started) == {parent["id"], blocker["id"]}

    async with pool.acquire() as conn:
        await succeed(conn, started[parent["id"]])
        row = await conn.fetchrow(CHILD, uuid.UUID(child["id"]))
    # Released from its parent into the wait for a slot: pending, not claimable, its due time kept
    # for the grant, and no slot taken by the release.
    assert dict(row) == {
        "status": "pending",
        "held": "concurrency",
        "parents_waiting": 0,
        "unclaimable": True,
        "kept": True,
    }
    assert await holders(pool) == [blocker["id"]]
    assert await claim_and_start(pool, settings) == {}
    assert await keeper.step() == 0  # the slot is still the blocker's

    async with pool.acquire() as conn:
        await succeed(conn, started[blocker["id"]])
    assert await keeper.step() == 1 and await holders(pool) == [child["id"]]
    released = await claim_and_start(pool, settings)
    assert set(released) == {child["id"]}
    async with pool.acquire() as conn:
        await succeed(conn, released[child["id"]])
    assert await holders(pool) == []
    assert (await api.get(f"/runs/{child['id']}", headers=auth)).json()["status"] == "succeeded"


async def finish_in_transaction(conn: asyncpg.Connection, run: asyncpg.Record) -> None:
    async with conn.transaction():
        await succeed(conn, run)


async def waiting_on_a_lock(pool: asyncpg.Pool, pid: int) -> bool:
    return bool(
        await pool.fetchval("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid)
    )


async def test_two_parents_finishing_at_once_release_their_shared_dependents_once(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    first, second = [await asyncpg.connect(settings.database_url) for _ in range(2)]
    try:
        for round_ in range(6):
            r = await batch(
                api,
                auth,
                [
                    {"job": "hello", "ref": "p1"},
                    {"job": "hello", "ref": "p2"},
                    *(
                        {"job": "hello", "depends_on": ["p1", "p2"] if i % 2 else ["p2", "p1"]}
                        for i in range(12)
                    ),
                ],
            )
            p1, p2, *children = r.json()["runs"]
            started = await claim_and_start(pool, settings)
            assert set(started) == {p1["id"], p2["id"]}
            one, other = started[p1["id"]], started[p2["id"]]
            if round_ == 0:
                # One parent's transaction counts the children down and holds their rows; the other's
                # statement waits for them, then counts down what the first committed.
                async with first.transaction():
                    await succeed(first, one)
                    racing = asyncio.create_task(finish_in_transaction(second, other))
                    for _ in range(500):
                        if await waiting_on_a_lock(pool, second.get_server_pid()):
                            break
                        await asyncio.sleep(0.01)
                    assert await waiting_on_a_lock(pool, second.get_server_pid())
                await racing
            else:
                # Both at once, the parents' order alternating between rounds.
                pair = (one, other) if round_ % 2 else (other, one)
                await asyncio.gather(
                    finish_in_transaction(first, pair[0]), finish_in_transaction(second, pair[1])
                )
            rows = [await pool.fetchrow(CHILD, uuid.UUID(c["id"])) for c in children]
            assert {
                (row["status"], row["held"], row["parents_waiting"], row["unclaimable"]) for row in rows
            } == {("pending", None, 0, False)}, round_
            # Each released once: claimed once, and nothing else is claimable after them.
            released = await claim_and_start(pool, settings)
            assert sorted(released) == sorted(c["id"] for c in children), round_
            async with pool.acquire() as conn:
                await succeed(conn, *released.values())
            assert await claim_and_start(pool, settings) == {}
    finally:
        await first.close()
        await second.close()


async def lock_waiters(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"))


async def test_a_submission_naming_a_parent_and_its_child_does_not_deadlock_with_the_parents_end(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    # The child scheduled earlier than its parent: its id, minted from scheduled_at, is lower.
    earlier = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    r = await batch(
        api,
        auth,
        [{"job": "hello", "ref": "p"}, {"job": "hello", "depends_on": ["p"], "scheduled_at": earlier}],
    )
    parent, child = r.json()["runs"]
    assert uuid.UUID(child["id"]) < uuid.UUID(parent["id"])
    started = await claim_and_start(pool, settings)
    holder, finisher = [await asyncpg.connect(settings.database_url) for _ in range(2)]
    try:
        # The parent's row is held a moment (as a heartbeat's statement would): its end queues for it
        # first, then the submission, which has locked the child (the lower id) meanwhile.
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM job_runs WHERE id = $1 FOR UPDATE", uuid.UUID(parent["id"]))
            ending = asyncio.create_task(finish_in_transaction(finisher, started[parent["id"]]))
            while await lock_waiters(pool) < 1:
                await asyncio.sleep(0.01)
            submitting = asyncio.create_task(
                batch(api, auth, [{"job": "hello", "depends_on": [child["id"], parent["id"]]}])
            )
            for _ in range(500):
                if await lock_waiters(pool) >= 2:
                    break
                await asyncio.sleep(0.01)
        ended, submitted = await asyncio.gather(ending, submitting, return_exceptions=True)
    finally:
        await holder.close()
        await finisher.close()
    assert ended is None, ended
    assert isinstance(submitted, httpx.Response) and submitted.status_code == 201, submitted
