"""Unique runs: at most one run per key (within a window, or while live); a duplicate is answered 200
with the run that exists and writes nothing, exactly, however many requests race from however many
API processes, in batches too."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import asyncpg
import httpx

from app.config import Settings
from app.engine.dedupe import DedupeKeySweeper
from app.services.dedupe import RULED_JOBS
from tests.support import api_client, assert_error, put_job, snapshot, submit_run
from tests.ui_support import ui_sign_in


async def submit(api: httpx.AsyncClient, auth: dict[str, str], **body: Any) -> httpx.Response:
    return await api.post("/tenants/acme/runs", json={"job": "once", **body}, headers=auth)


async def later(seconds: float, request: Awaitable[httpx.Response]) -> httpx.Response:
    await asyncio.sleep(seconds)
    return await request


async def runs_of(pool: asyncpg.Pool, job: str = "once") -> list[asyncpg.Record]:
    return await pool.fetch("SELECT * FROM job_runs WHERE job = $1 ORDER BY created_at, id", job)


async def test_a_duplicate_is_answered_with_the_run_that_exists_and_writes_nothing(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    job = await put_job(api, "acme", "once", auth, unique={"key": "payload.user_id"})
    assert job["unique"] == {"key": "payload.user_id", "within_seconds": None} and job["debounce"] is None
    first = await submit(api, auth, payload={"user_id": 7, "n": 1})
    assert first.status_code == 201, first.text
    assert first.json()["dedupe_key"] == "7"
    before = await snapshot(pool)
    version = "SELECT xmin::text FROM dedupe_keys WHERE key = '7'"  # a row rewritten as it was gets another
    written = await pool.fetchval(version)
    again = await submit(api, auth, payload={"user_id": 7, "n": 2})
    assert again.status_code == 200 and again.json() == first.json()
    assert await snapshot(pool) == before and await pool.fetchval(version) == written  # nothing written
    other = await submit(api, auth, payload={"user_id": 8})
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]
    read = (await api.get(f"/runs/{first.json()['id']}", headers=auth)).json()
    assert read["dedupe_key"] == "7" and read["payload"] == {"user_id": 7, "n": 1}
    # A job without a rule is untouched by it.
    plain = await submit_run(api, "acme", auth, job="hello", payload={"user_id": 7})
    assert plain["dedupe_key"] is None


async def test_the_key_is_the_fields_json_value(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    """1 and "1" differ; a missing field and a null one share the key `null`; a long value is hashed."""
    auth = tenant["auth"]
    await put_job(api, "acme", "once", auth, unique={"key": "payload.user.id"})
    keys = {}
    for name, payload in {
        "number": {"user": {"id": 1}},
        "string": {"user": {"id": "1"}},
        "missing": {"other": True},
        "null": {"user": {"id": None}},
        "not an object": [1, 2],
        "long": {"user": {"id": "x" * 500}},
    }.items():
        r = await submit(api, auth, payload=payload)
        keys[name] = (r.status_code, r.json()["dedupe_key"], r.json()["id"])
    assert keys["number"][:2] == (201, "1") and keys["string"][:2] == (201, '"1"')
    assert keys["missing"][:2] == (201, "null")
    assert keys["null"] == (200, "null", keys["missing"][2])
    assert keys["not an object"] == (200, "null", keys["missing"][2])
    assert keys["long"][0] == 201 and keys["long"][1].startswith("sha256:") and len(keys["long"][1]) == 71


async def test_a_null_key_is_one_key_for_the_whole_job(api: httpx.AsyncClient, tenant: dict) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "once", auth, payload={"default": True}, unique={"key": None})
    first = await submit(api, auth, payload={"a": 1})
    assert first.status_code == 201 and first.json()["dedupe_key"] == ""
    for payload in ({"a": 2}, None, [1]):
        r = await submit(api, auth, payload=payload)
        assert r.status_code == 200 and r.json()["id"] == first.json()["id"]


async def test_the_live_variant_allows_a_new_run_once_the_first_ended(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "once", auth, unique={"key": "payload.user_id"})
    first = (await submit(api, auth, payload={"user_id": 1})).json()
    # Dispatched and running are live too.
    for status in ("dispatched", "running"):
        await pool.execute("UPDATE job_runs SET status = $2 WHERE id = $1", first["id"], status)
        r = await submit(api, auth, payload={"user_id": 1})
        assert r.status_code == 200 and r.json()["id"] == first["id"] and r.json()["status"] == status
    await pool.execute("UPDATE job_runs SET status = 'pending' WHERE id = $1", first["id"])
    assert (await api.post(f"/runs/{first['id']}/cancel", headers=auth)).status_code == 200
    second = await submit(api, auth, payload={"user_id": 1})
    assert second.status_code == 201 and second.json()["id"] != first["id"]
    third = await submit(api, auth, payload={"user_id": 1})
    assert third.status_code == 200 and third.json()["id"] == second.json()["id"]
    holder = await pool.fetchval("SELECT run_id FROM dedupe_keys WHERE key = '1'")
    assert str(holder) == second.json()["id"]


async def test_a_window_holds_whatever_became_of_its_run_and_then_frees(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "once", auth, unique={"key": "payload.user_id", "within_seconds": 1})
    first = (await submit(api, auth, payload={"user_id": 1})).json()
    assert (await api.post(f"/runs/{first['id']}/cancel", headers=auth)).status_code == 200
    again = await submit(api, auth, payload={"user_id": 1})
    assert again.status_code == 200 and again.json()["id"] == first["id"]
    assert again.json()["status"] == "cancelled"
    await asyncio.sleep(1.1)
    second = await submit(api, auth, payload={"user_id": 1})
    assert second.status_code == 201 and second.json()["id"] != first["id"]
    assert len(await runs_of(pool)) == 2


async def test_a_batch_with_duplicates_inside_it_and_of_a_live_run(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "once", auth, unique={"key": "payload.u"})
    live = (await submit(api, auth, payload={"u": 1})).json()
    body = {"runs": [{"job": "once", "payload": {"u": u}} for u in (1, 2, 2, 3)] + [{"job": "hello"}]}
    r = await api.post("/tenants/acme/runs/batch", json=body, headers=auth)
    assert r.status_code == 201, r.text
    runs, created = r.json()["runs"], r.json()["created"]
    assert created == [False, True, False, True, True]
    assert runs[0] == live
    assert runs[1]["id"] == runs[2]["id"] != runs[3]["id"]
    assert [run["payload"] for run in runs[:4]] == [{"u": 1}, {"u": 2}, {"u": 2}, {"u": 3}]
    assert len(await runs_of(pool)) == 3
    # Sent again, every item is a duplicate: nothing is written.
    before = await snapshot(pool)
    r = await api.post("/tenants/acme/runs/batch", json=body | {"runs": body["runs"][:4]}, headers=auth)
    assert r.json()["created"] == [False] * 4 and [x["id"] for x in r.json()["runs"]] == [
        x["id"] for x in runs[:4]
    ]
    assert await snapshot(pool) == before


async def test_concurrent_duplicates_from_two_api_processes_make_one_run(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    """Many requests for one key at the same instant, through two apps on their own pools: one 201,
    the rest 200 with that run (a duplicate against its original committing at the same moment)."""
    auth = tenant["auth"]
    await put_job(api, "acme", "once", auth, unique={"key": "payload.u"})
    async with api_client(settings) as other:
        for u in range(3):
            answers = await asyncio.gather(
                *(
                    submit(client, auth, payload={"u": u, "i": i})
                    for i in range(12)
                    for client in (api, other)
                )
            )
            assert sorted(a.status_code for a in answers) == [200] * 23 + [201]
            assert len({a.json()["id"] for a in answers}) == 1
        # Batches naming the same keys in opposite orders neither deadlock nor double up.
        keys = [{"job": "once", "payload": {"u": f"b{k}"}} for k in range(30)]
        batches = await asyncio.gather(
            *(
                client.post("/tenants/acme/runs/batch", json={"runs": order}, headers=auth)
                for client in (api, other)
                for order in (keys, keys[::-1])
            )
        )
    assert [b.status_code for b in batches] == [201] * 4
    assert sum(sum(b.json()["created"]) for b in batches) == 30
    assert len(await runs_of(pool)) == 33


async def test_a_duplicate_racing_the_end_of_its_holder_never_makes_two_live_runs(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    """The holder is cancelled at the instant a duplicate arrives: the duplicate gets it (live when
    looked at) or a new run (ended when looked at), never a second run beside a live one."""
    auth = tenant["auth"]
    await put_job(api, "acme", "once", auth, unique={"key": "payload.u"})
    outcomes = set()
    for u in range(15):
        first = (await submit(api, auth, payload={"u": u})).json()
        cancel, dup = await asyncio.gather(
            later(u % 5 * 0.002, api.post(f"/runs/{first['id']}/cancel", headers=auth)),
            submit(api, auth, payload={"u": u}),
        )
        assert cancel.status_code == 200
        outcomes.add(dup.status_code)
        if dup.status_code == 200:
            assert dup.json()["id"] == first["id"]
        live = await pool.fetchval(
            "SELECT count(*) FROM job_runs WHERE job = 'once' AND dedupe_key = $1 AND status = 'pending'",
            str(u),
        )
        assert live == (1 if dup.status_code == 201 else 0)
    assert outcomes <= {200, 201}


async def test_a_holder_ending_uncommitted_still_answers_the_duplicate(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    """Its end not yet committed when the duplicate looks, the holder is live: it answers; once the
    end has committed, the next submission makes a new run."""
    auth = tenant["auth"]
    await put_job(api, "acme", "once", auth, unique={"key": "payload.u"})
    first = (await submit(api, auth, payload={"u": 1})).json()
    async with pool.acquire() as conn:
        ending = conn.transaction()
        await ending.start()
        await conn.execute(
            "UPDATE job_runs SET status = 'succeeded', finished_at = now() WHERE id = $1", first["id"]
        )
        dup = await submit(api, auth, payload={"u": 1})
        await ending.commit()
    assert dup.status_code == 200 and dup.json()["id"] == first["id"] and dup.json()["status"] == "pending"
    after = await submit(api, auth, payload={"u": 1})
    assert after.status_code == 201 and after.json()["id"] != first["id"]


async def test_an_idempotency_key_replays_the_run_it_was_answered_with(
    api: httpx.AsyncClient, tenant: dict
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "once", auth, unique={"key": "payload.u"})
    first = (await submit(api, auth, payload={"u": 1})).json()
    dup = await submit(api, auth, payload={"u": 1}, idempotency_key="k1")
    assert dup.status_code == 200 and dup.json()["id"] == first["id"]
    assert (await api.post(f"/runs/{first['id']}/cancel", headers=auth)).status_code == 200
    # The key is free now, but the request replays the answer it had.
    replay = await submit(api, auth, payload={"u": 1}, idempotency_key="k1")
    assert replay.status_code == 200 and replay.json()["id"] == first["id"]
    fresh = await submit(api, auth, payload={"u": 1})
    assert fresh.status_code == 201


async def test_a_duplicate_is_answered_when_the_tenant_is_at_its_quota(
    tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    async with api_client(settings, tenant_max_pending=1) as api:
        await put_job(api, "acme", "once", auth, unique={"key": "payload.u"})
        first = await submit(api, auth, payload={"u": 1})
        assert first.status_code == 201
        before = await snapshot(pool)
        dup = await submit(api, auth, payload={"u": 1})
        assert dup.status_code == 200 and dup.json()["id"] == first.json()["id"]
        assert_error(await submit(api, auth, payload={"u": 2}), 429, "over_quota")
        assert_error(await submit(api, auth, job="hello"), 429, "over_quota")
        assert await snapshot(pool) == before


async def test_the_sweep_deletes_keys_that_hold_nothing(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "once", auth, unique={"key": "payload.u"})
    await put_job(api, "acme", "windowed", auth, unique={"key": "payload.u", "within_seconds": 3600})
    ended = (await submit(api, auth, payload={"u": "ended"})).json()
    await submit(api, auth, payload={"u": "live"})
    await submit(api, auth, job="windowed", payload={"u": "open"})
    closed = (await submit(api, auth, job="windowed", payload={"u": "closed"})).json()
    await api.post(f"/runs/{ended['id']}/cancel", headers=auth)
    await api.post(f"/runs/{closed['id']}/cancel", headers=auth)
    await pool.execute("UPDATE dedupe_keys SET window_ends_at = now() WHERE key = '\"closed\"'")
    assert await DedupeKeySweeper(settings, pool).step() == 2
    kept = await pool.fetch("SELECT job, key FROM dedupe_keys ORDER BY job, key")
    assert [tuple(r) for r in kept] == [("once", '"live"'), ("windowed", '"open"')]


async def test_rules_are_validated_and_a_refused_job_writes_nothing(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    before = await snapshot(pool)
    cases = [
        ("unique.key", {"unique": {"key": "user_id"}}),
        ("unique.key", {"unique": {"key": "payload." + ".".join(["a"] * 9)}}),
        ("unique.key", {"unique": {"key": "payload.a b"}}),
        ("unique.within_seconds", {"unique": {"within_seconds": 0}}),
        ("unique.within_seconds", {"unique": {"within_seconds": 31 * 86_400}}),
        ("unique.other", {"unique": {"other": 1}}),
        ("debounce.period_seconds", {"debounce": {"period_seconds": 3601, "max_delay_seconds": 4000}}),
        ("debounce.max_delay_seconds", {"debounce": {"period_seconds": 10}}),
        ("debounce.max_delay_seconds", {"debounce": {"period_seconds": 10, "max_delay_seconds": 5}}),
        ("debounce.max_delay_seconds", {"debounce": {"period_seconds": 10, "max_delay_seconds": 86_401}}),
        ("debounce", {"unique": {}, "debounce": {"period_seconds": 1, "max_delay_seconds": 1}}),
    ]
    for field, rule in cases:
        r = await api.put("/tenants/acme/jobs/ruled", json={"target": {"type": "noop"}, **rule}, headers=auth)
        assert_error(r, 422, "invalid_input", field=field)
    assert await snapshot(pool) == before


async def test_a_rule_removed_or_added_applies_to_the_next_submission(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    """The API process remembers which jobs have a rule only as a hint for the way in: a job whose
    rule went is submitted as a plain one (and forgotten), one given a rule is keyed at once."""
    auth = tenant["auth"]
    await put_job(api, "acme", "once", auth, unique={"key": "payload.u"})
    first = (await submit(api, auth, payload={"u": 1})).json()
    assert RULED_JOBS.any_of("acme", {"once"})
    await put_job(api, "acme", "once", auth)
    plain = await submit(api, auth, payload={"u": 1})
    assert plain.status_code == 201 and plain.json()["dedupe_key"] is None
    assert not RULED_JOBS.any_of("acme", {"once"})
    # Given its rule again, the job finds the key its first run still holds.
    await put_job(api, "acme", "once", auth, unique={"key": "payload.u"})
    again = await submit(api, auth, payload={"u": 1})
    assert again.status_code == 200 and again.json()["id"] == first["id"]
    assert len(await runs_of(pool)) == 2


async def test_the_dashboard_shows_the_rule_and_the_key(api: httpx.AsyncClient, tenant: dict) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "once", auth, unique={"key": "payload.u", "within_seconds": 60})
    rule = {"key": None, "period_seconds": 5, "max_delay_seconds": 30}
    await put_job(api, "acme", "doc", auth, debounce=rule)
    run = (await submit(api, auth, payload={"u": "a<b"})).json()
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    try:
        jobs = (await browser.get("/ui/jobs")).text
        assert "one run per <code>payload.u</code> within 60 s" in jobs
        assert "debounced per job: 5 s, at most 30 s" in jobs
        page = (await browser.get(f"/ui/runs/{run['id']}")).text
        assert '<dd id="dedupe-key"><code>&#34;a&lt;b&#34;</code></dd>' in page
    finally:
        await browser.aclose()
