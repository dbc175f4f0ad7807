"""One tenant's poison run cannot stop the engine (issue 12, item 1).

The poison runs are inserted directly: the API refuses such payloads, but the engine must not trust
that every row it claims came through the API (older rows, cron copies, another writer)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path

import asyncpg
import nats

from app.bus.jetstream import ensure_stream
from app.config import Settings
from app.engine.dispatcher import Dispatcher
from app.engine.messages import Built
from app.telemetry import metrics
from stack.eventually import eventually
from tests import factories
from tests.integration.test_engine_faults import statuses
from tests.processes import processes
from tests.support import stream_runs

# 254 levels: Postgres and orjson store it, but inside the message envelope it is one level too deep.
TOO_DEEP_FOR_THE_MESSAGE = "[" * 254 + "]" * 254
# jsonb keeps 1e400 as a number; orjson cannot decode it (it is no float).
UNDECODABLE = '{"n": 1e400}'


async def poison(conn: asyncpg.Connection, tenant_id: str, payloads: list[str]) -> list[str]:
    rows = await factories.runs(conn, len(payloads), tenant_id=tenant_id, job_name="evil")
    for row, payload in zip(rows, payloads, strict=True):
        await conn.execute("UPDATE job_runs SET payload = $1::text::jsonb WHERE id = $2", payload, row["id"])
    return [str(r["id"]) for r in rows]


async def run_engine(dispatcher: Dispatcher, pool: asyncpg.Pool, until: int) -> None:
    """Run the dispatch loop until `until` runs are no longer pending; it must not die on the way."""
    stop = asyncio.Event()
    loop = asyncio.create_task(dispatcher.run(stop))
    try:
        for _ in range(300):
            assert not loop.done(), f"the dispatcher died: {loop.exception()!r}"
            counts = await statuses(pool)
            if sum(n for status, n in counts.items() if status != "pending") >= until:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        assert not loop.done(), f"the dispatcher died: {loop.exception()!r}"
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await loop


async def test_a_poison_payload_fails_alone_and_the_batch_is_published(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    async with pool.acquire() as conn:
        good = await factories.runs(conn, 40, tenant_id="good")
        bad = await poison(conn, "evil", [TOO_DEEP_FOR_THE_MESSAGE, UNDECODABLE])
        more_good = await factories.runs(conn, 10, tenant_id="good2")
    nc = await nats.connect(settings.nats_url)
    try:
        await ensure_stream(nc.jetstream(), settings)
        await run_engine(Dispatcher(settings, pool, nc), pool, until=52)
    finally:
        await nc.close()
    async with pool.acquire() as conn:
        rows = {
            str(r["id"]): r
            for r in await conn.fetch("SELECT id, status, finished_at, attempt, last_error FROM job_runs")
        }
    for run_id in bad:
        row = rows[run_id]
        assert row["status"] == "failed" and row["finished_at"] is not None and row["attempt"] == 0
        assert row["last_error"].startswith("the run's message cannot be built"), row["last_error"]
    assert "Recursion limit" in rows[bad[0]]["last_error"]
    for run in [*good, *more_good]:
        assert rows[str(run["id"])]["status"] == "dispatched"
    published = {i.split(":")[0] for i in await stream_runs(settings.nats_url, settings)}
    assert published == {str(r["id"]) for r in [*good, *more_good]}


def buggy(dispatcher: Dispatcher) -> Dispatcher:
    """Its first batch raises, as an engine bug or unforeseen data would."""
    build = dispatcher.batches.outgoing

    def outgoing(claimed: Sequence[asyncpg.Record]) -> Built:
        if not dispatcher.failed:  # type: ignore[attr-defined]
            dispatcher.failed = True  # type: ignore[attr-defined]
            raise RuntimeError("an unforeseen bug")
        return build(claimed)

    dispatcher.failed = False  # type: ignore[attr-defined]
    dispatcher.batches.outgoing = outgoing  # type: ignore[method-assign]
    return dispatcher


async def test_an_unexpected_error_in_one_batch_does_not_end_the_loop(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    s = settings.model_copy(update={"batch_size": 5})
    async with pool.acquire() as conn:
        await factories.runs(conn, 5, tenant_id="first")
    nc = await nats.connect(s.nats_url)
    stop = asyncio.Event()
    dispatcher = buggy(Dispatcher(s, pool, nc))
    counted = metrics.unexpected_errors_total.labels("dispatch")
    before = counted._value.get()
    loop = asyncio.create_task(dispatcher.run(stop))
    try:
        await ensure_stream(nc.jetstream(), s)
        await eventually(lambda: dispatcher.failed, what="the poison run failed")
        async with pool.acquire() as conn:
            later = await factories.runs(conn, 3, tenant_id="later")
        await eventually(lambda: statuses(pool), until=lambda c: c == {"dispatched": 8}, timeout=5)
        assert not loop.done(), f"the dispatcher died: {loop.exception()!r}"
        assert counted._value.get() == before + 1  # seen: logged with its traceback and counted
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await loop
        await nc.close()
    async with pool.acquire() as conn:
        got = {r["id"]: r["status"] for r in await conn.fetch("SELECT id, status FROM job_runs")}
    # The later runs went out; the abandoned batch waits for its lease (the reaper is not running here).
    assert all(got[r["id"]] == "dispatched" for r in later) and set(got.values()) == {"dispatched"}
    published = {i.split(":")[0] for i in await stream_runs(s.nats_url, s)}
    assert published == {str(r["id"]) for r in later}


async def test_a_standalone_engine_survives_poison_runs(
    settings: Settings, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    """`scheduler engine` as deployed: it once exited on the first poison run it claimed."""
    async with pool.acquire() as conn:
        bad = await poison(conn, "evil", [TOO_DEEP_FOR_THE_MESSAGE, UNDECODABLE])
        good = await factories.runs(conn, 20, tenant_id="good")
    async with processes(settings, tmp_path) as spawn:
        engine = spawn("engine")
        await engine.wait_ready()
        for _ in range(200):
            if (await statuses(pool)).get("pending", 0) == 0:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        assert engine.proc.poll() is None, engine.output()
        async with pool.acquire() as conn:
            got = {str(r["id"]): r["status"] for r in await conn.fetch("SELECT id, status FROM job_runs")}
    assert [got[r] for r in bad] == ["failed", "failed"]
    assert all(got[str(r["id"])] == "dispatched" for r in good)
