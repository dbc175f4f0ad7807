"""Admission under concurrency, cron under the quota, and idempotency keys that live as long as their
runs (issues 12 items 5-6, 13 items 2 and 5)."""

from __future__ import annotations

import asyncio
import socket
import time
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import orjson

from app.config import Settings
from app.engine.cron import CronMaterializer
from app.engine.idempotency import IdempotencyKeyPruner
from app.telemetry import metrics
from tests.support import api_client, bearer, create_tenant, put_job, submit_run


async def pending(pool: asyncpg.Pool, tenant_id: str) -> int:
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM job_runs WHERE tenant_id = $1 AND status = 'pending'", tenant_id
        )
    )


# ─── the quota race ───


async def test_concurrent_batches_cannot_pass_the_quota_together(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    async with api_client(settings, tenant_max_pending=200) as api:
        auth = bearer((await create_tenant(api, "acme"))["api_key"])
        await put_job(api, "acme", "hello", auth)
        batch = {"runs": [{"job": "hello"}] * 200}
        # Today: 20 concurrent batches of 200 against a quota of 200 wrote 800 (check and count sat on
        # either side of an await).
        responses = await asyncio.gather(
            *(api.post("/tenants/acme/runs/batch", json=batch, headers=auth) for _ in range(20))
        )
        codes = sorted(r.status_code for r in responses)
        assert codes == [201] + [429] * 19, codes
        assert await pending(pool, "acme") == 200

        # Single POSTs at the edge: none passes once the backlog is full, however many race.
        responses = await asyncio.gather(
            *(api.post("/tenants/acme/runs", json={"job": "hello"}, headers=auth) for _ in range(30))
        )
        assert {r.status_code for r in responses} == {429}
        assert await pending(pool, "acme") == 200


async def test_singles_racing_to_the_quota_admit_exactly_the_quota(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    async with api_client(settings, tenant_max_pending=10) as api:
        auth = bearer((await create_tenant(api, "acme"))["api_key"])
        calm = bearer((await create_tenant(api, "calm"))["api_key"])
        await put_job(api, "acme", "hello", auth)
        await put_job(api, "calm", "hello", calm)
        responses = await asyncio.gather(
            *(api.post("/tenants/acme/runs", json={"job": "hello"}, headers=auth) for _ in range(40))
        )
        codes = sorted(r.status_code for r in responses)
        assert codes == [201] * 10 + [429] * 30, codes
        assert await pending(pool, "acme") == 10
        # The neighbour's own quota is untouched.
        await submit_run(api, "calm", calm, job="hello")


# ─── cron counts against the quota ───


async def test_cron_occurrences_over_the_quota_are_skipped_and_counted(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    calm = bearer((await create_tenant(api, "calm"))["api_key"])
    for i in range(12):  # 12 jobs firing every minute against a quota of 5
        await put_job(api, "acme", f"tick-{i}", tenant["auth"], schedule="* * * * *")
    await put_job(api, "calm", "tick", calm, schedule="* * * * *")
    quota = settings.model_copy(update={"tenant_max_pending": 5, "cron_horizon_seconds": 180})
    skipped_before = metrics.cron_occurrences_skipped_total.labels("quota")._value.get()

    inserted = await CronMaterializer(quota, pool).step()

    assert await pending(pool, "acme") == 5
    calm_runs = await pending(pool, "calm")
    assert calm_runs >= 2  # its own occurrences in the horizon, unaffected by the flood beside it
    assert inserted == 5 + calm_runs
    skipped = metrics.cron_occurrences_skipped_total.labels("quota")._value.get() - skipped_before
    assert skipped >= 12 * 2 - 5  # each job had at least two occurrences within three minutes
    # Skipped occurrences are not retried later: next_fire_at moved past them, like the inserted ones.
    nexts = await pool.fetch(
        "SELECT next_fire_at FROM jobs WHERE tenant_id = 'acme' AND schedule IS NOT NULL"
    )
    now = await pool.fetchval("SELECT now()")
    assert all(r["next_fire_at"] > now + timedelta(seconds=120) for r in nexts)


# ─── idempotency keys ───


async def test_a_key_holds_while_its_run_is_unfinished_and_goes_after_the_grace(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    when = (datetime.now(UTC) + timedelta(days=2)).isoformat()
    body = {"job": "hello", "scheduled_at": when, "idempotency_key": "report-42"}
    first = await submit_run(api, "acme", tenant["auth"], **body)
    gone = await submit_run(api, "acme", tenant["auth"], job="hello", idempotency_key="gone")
    # 25 hours later, as far as the keys' floor is concerned (keys used to expire after 24 h).
    await pool.execute("UPDATE idempotency_keys SET expires_at = now() - interval '1 hour'")
    await pool.execute("DELETE FROM job_runs WHERE id = $1", gone["id"])  # its day was dropped
    await IdempotencyKeyPruner(settings, pool).step()

    again = await api.post("/tenants/acme/runs", json=body, headers=tenant["auth"])
    assert again.status_code == 200 and again.json()["id"] == first["id"], again.text
    assert await pool.fetchval("SELECT count(*) FROM job_runs") == 1
    assert await pool.fetchval("SELECT array_agg(key) FROM idempotency_keys") == ["report-42"]

    # Finished, but within the grace period: kept.
    await pool.execute("UPDATE job_runs SET status = 'succeeded', finished_at = now() - interval '1 hour'")
    await IdempotencyKeyPruner(settings, pool).step()
    assert await pool.fetchval("SELECT count(*) FROM idempotency_keys") == 1
    # Finished longer than the grace period ago: deleted.
    await pool.execute("UPDATE job_runs SET finished_at = now() - interval '25 hours'")
    await IdempotencyKeyPruner(settings, pool).step()
    assert await pool.fetchval("SELECT count(*) FROM idempotency_keys") == 0


async def test_a_request_still_in_flight_with_the_same_key_is_409(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    async with pool.acquire() as conn:
        in_flight = conn.transaction()
        await in_flight.start()
        # Another request holds the key, uncommitted, as a submission does inside its transaction.
        await conn.execute(
            "INSERT INTO idempotency_keys (tenant_id, key, run_id, run_scheduled_at, body_hash, expires_at) "
            "VALUES ('acme', 'busy', gen_random_uuid(), now(), 'x', now() + interval '1 day')"
        )
        try:
            r = await asyncio.wait_for(
                api.post(
                    "/tenants/acme/runs",
                    json={"job": "hello", "idempotency_key": "busy"},
                    headers=tenant["auth"],
                ),
                timeout=10,
            )
            assert r.status_code == 409 and r.json()["field"] == "idempotency_key", r.text
            assert await pool.fetchval("SELECT count(*) FROM job_runs") == 0
        finally:
            await in_flight.rollback()
    r = await api.post(
        "/tenants/acme/runs", json={"job": "hello", "idempotency_key": "busy"}, headers=tenant["auth"]
    )
    assert r.status_code == 201, r.text


def post_head_only(port: int, path: str, auth: dict[str, str], length: int) -> bytes:
    """A POST whose head declares `length` body bytes, none of which are sent; returns the answer."""
    headers = "".join(f"{k}: {v}\r\n" for k, v in auth.items())
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{headers}"
    head += f"Content-Length: {length}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(head.encode())
        return sock.recv(65536)


async def test_a_full_tenants_batch_is_refused_before_its_body_is_read(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    async with api_client(settings, tenant_max_pending=2) as api:
        auth = bearer((await create_tenant(api, "acme"))["api_key"])
        await put_job(api, "acme", "hello", auth)
        for _ in range(2):
            await submit_run(api, "acme", auth, job="hello")
        r = await api.post("/tenants/acme/runs", json={"job": "hello"}, headers=auth)
        assert r.status_code == 429  # counted: the backlog is known to be full
        port = int(str(api.base_url).rsplit(":", 1)[1].strip("/"))
        # 15 MiB declared, not one byte sent: the answer cannot have waited for (or parsed) it.
        answer = await asyncio.to_thread(post_head_only, port, "/tenants/acme/runs/batch", auth, 15 << 20)
        assert answer.startswith(b"HTTP/1.1 429"), answer
        # A stranger learns nothing about the tenant's backlog.
        answer = await asyncio.to_thread(post_head_only, port, "/tenants/acme/runs/batch", {}, 15 << 20)
        assert answer.startswith(b"HTTP/1.1 401"), answer


async def test_across_two_api_processes_the_overshoot_is_bounded_as_documented(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    """Two processes each decide on their own count: what one admits within the other's count age is
    the documented bound (here: one batch of the other), never a free-for-all."""
    async with (
        api_client(settings, tenant_max_pending=200) as one,
        api_client(settings, tenant_max_pending=200) as two,
    ):
        auth = bearer((await create_tenant(one, "acme"))["api_key"])
        await put_job(one, "acme", "hello", auth)
        batch = {"runs": [{"job": "hello"}] * 200}
        responses = await asyncio.gather(
            *(api.post("/tenants/acme/runs/batch", json=batch, headers=auth) for api in (one, two) * 10)
        )
        assert sum(r.status_code == 201 for r in responses) <= 2
        assert await pending(pool, "acme") <= 200 + 200  # the quota, plus one batch of the other process
        # Once either process counts again, neither admits more.
        await asyncio.sleep(0.2)
        for api in (one, two):
            r = await api.post("/tenants/acme/runs", json={"job": "hello"}, headers=auth)
            assert r.status_code == 429, r.text


def post_whole(port: int, path: str, auth: dict[str, str], body: bytes) -> bytes:
    """A POST of the whole body (sent even if the answer comes first); returns the answer's head."""
    headers = "".join(f"{k}: {v}\r\n" for k, v in auth.items())
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{headers}"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode() + body)
        return sock.recv(65536)


async def test_a_full_tenant_whose_count_aged_pays_for_its_own_refusals(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    """Four connections post 11 MiB batches as a tenant over its quota, its count older than the
    count's TTL (1 s), beside a well-behaved tenant. Each batch used to be read and parsed before
    its 429 (1.2-1.6 s of the event loop each): the other tenant's submissions took seconds."""
    async with api_client(settings, tenant_max_pending=200) as api:
        port = int(str(api.base_url).rsplit(":", 1)[1].strip("/"))
        hostile = bearer((await create_tenant(api, "hostile"))["api_key"])
        good = bearer((await create_tenant(api, "good"))["api_key"])
        for tenant, auth in (("hostile", hostile), ("good", good)):
            await put_job(api, tenant, "hello", auth)
        batch = {"runs": [{"job": "hello"}] * 200}
        r = await api.post("/tenants/hostile/runs/batch", json=batch, headers=hostile)
        assert r.status_code == 201, r.text
        r = await api.post("/tenants/hostile/runs", json={"job": "hello"}, headers=hostile)
        assert r.status_code == 429  # counted: full
        await asyncio.sleep(1.2)  # the count is now older than its TTL
        # Declared, never sent: only a refusal before reading can answer it.
        head = await asyncio.to_thread(post_head_only, port, "/tenants/hostile/runs/batch", hostile, 15 << 20)
        assert head.startswith(b"HTTP/1.1 429"), head
        body = orjson.dumps({"runs": [{"job": "hello", "payload": list(range(1000)) * 3}] * 1000})
        stop = time.monotonic() + 4
        answers: list[bytes] = []

        async def flood() -> None:
            while time.monotonic() < stop:
                answers.append(
                    await asyncio.to_thread(post_whole, port, "/tenants/hostile/runs/batch", hostile, body)
                )
                await asyncio.sleep(1.1)  # past the TTL again between batches

        floods = [asyncio.create_task(flood()) for _ in range(4)]
        took: list[float] = []
        while time.monotonic() < stop:
            started = time.perf_counter()
            r = await api.post("/tenants/good/runs", json={"job": "hello"}, headers=good)
            assert r.status_code == 201, r.text
            assert (await api.get("/healthz")).status_code == 200
            took.append(time.perf_counter() - started)
            await asyncio.sleep(0.05)
        await asyncio.gather(*floods)
        assert answers and all(a.startswith(b"HTTP/1.1 429") for a in answers), {a[:20] for a in answers}
        assert max(took) < 0.5, sorted(took)[-5:]
        assert await pending(pool, "hostile") == 200


async def test_large_batches_are_parsed_off_the_event_loop(settings: Settings, pool: asyncpg.Pool) -> None:
    """Four connections post 11 MiB batches refused once parsed (the last payload is too deep),
    beside a well-behaved tenant: each was parsed and checked on the event loop (1.2-1.6 s each),
    and the other tenant's submissions took seconds. A large valid batch is still taken, and a
    large body that is not JSON refused as any other."""
    async with api_client(settings) as api:
        port = int(str(api.base_url).rsplit(":", 1)[1].strip("/"))
        hostile = bearer((await create_tenant(api, "hostile"))["api_key"])
        good = bearer((await create_tenant(api, "good"))["api_key"])
        for tenant, auth in (("hostile", hostile), ("good", good)):
            await put_job(api, tenant, "hello", auth)
        deep: object = 1
        for _ in range(40):
            deep = {"a": deep}
        runs = [{"job": "hello", "payload": list(range(1000)) * 3}] * 999 + [
            {"job": "hello", "payload": deep}
        ]
        body = orjson.dumps({"runs": runs})
        stop = time.monotonic() + 5
        answers: list[bytes] = []

        async def flood() -> None:
            while time.monotonic() < stop:
                answers.append(
                    await asyncio.to_thread(post_whole, port, "/tenants/hostile/runs/batch", hostile, body)
                )

        floods = [asyncio.create_task(flood()) for _ in range(4)]
        took: list[float] = []
        while time.monotonic() < stop:
            started = time.perf_counter()
            r = await api.post("/tenants/good/runs", json={"job": "hello"}, headers=good)
            assert r.status_code == 201, r.text
            took.append(time.perf_counter() - started)
            await asyncio.sleep(0.05)
        await asyncio.gather(*floods)
        assert answers and all(a.startswith(b"HTTP/1.1 422") for a in answers), {a[:20] for a in answers}
        assert max(took) < 1.0, sorted(took)[-5:]
        assert await pending(pool, "hostile") == 0
        valid = await api.post(
            "/tenants/hostile/runs/batch", content=orjson.dumps({"runs": runs[:999]}), headers=hostile
        )
        assert valid.status_code == 201 and len(valid.json()["runs"]) == 999, valid.text[:200]
        refused = await api.post("/tenants/hostile/runs/batch", content=body, headers=hostile)
        assert refused.status_code == 422 and refused.json()["field"] == "runs[999].payload", refused.text
        broken = await api.post("/tenants/hostile/runs/batch", content=body[:-1], headers=hostile)
        assert broken.status_code == 422 and broken.json()["field"] == "body", broken.text
