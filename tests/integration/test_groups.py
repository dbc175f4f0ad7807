"""Groups (fan-in) on real Postgres: made by a batch, joined while open, completed exactly once by
the transaction that ends their last run, however many connections end runs at once; fired once
by any number of engines' passes (app.engine.groups)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx

from app.config import Settings
from app.engine.groups import GroupFirer, GroupPruner
from app.services.groups import completion_payload
from app.services.run_requests import RunRequest
from app.services.submission import submit
from tests.support import api_client, assert_error, count_rows, create_tenant, put_job, snapshot
from tests.ui_support import ui_sign_in


def later(hours: float = 1) -> str:
    return (datetime.now(UTC) + timedelta(hours=hours)).isoformat()


async def batch(api: httpx.AsyncClient, auth: dict, n: int, group: dict, **run: object) -> dict:
    r = await api.post(
        "/tenants/acme/runs/batch", json={"runs": [{"job": "hello", **run}] * n, "group": group}, headers=auth
    )
    assert r.status_code == 201, r.text
    return dict(r.json())


async def group_of(api: httpx.AsyncClient, auth: dict, group_id: str) -> dict:
    r = await api.get(f"/tenants/acme/groups/{group_id}", headers=auth)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def end_concurrently(pool: asyncpg.Pool, run_ids: list[str], statuses: list[str]) -> None:
    """Ends each run in its own transaction, on as many connections as the pool holds, all at once:
    the finishers' race the group's completion must survive."""

    async def end(run_id: str, status: str) -> None:
        async with pool.acquire() as conn:
            await conn.execute(
                "UPDATE job_runs SET status = $2, finished_at = now() WHERE id = $1",
                uuid.UUID(run_id),
                status,
            )

    await asyncio.gather(*(end(r, s) for r, s in zip(run_ids, statuses, strict=True)))


async def test_a_batch_makes_a_group_whose_progress_is_counted(api: httpx.AsyncClient, tenant: dict) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "report", auth)
    made = await batch(
        api, auth, 3, {"name": "nightly", "on_complete": {"job": "report", "payload": {"x": 1}}}
    )
    group = await group_of(api, auth, made["group_id"])
    assert {r["group_id"] for r in made["runs"]} == {made["group_id"]}
    assert group["name"] == "nightly" and group["total"] == 3 and group["pending"] == 3
    assert group["on_complete"] == {"job": "report", "payload": {"x": 1}}
    assert group["completed_at"] is None and group["fired_at"] is None
    listed = await api.get(f"/tenants/acme/runs?group={made['group_id']}", headers=auth)
    assert sorted(r["id"] for r in listed.json()["runs"]) == sorted(r["id"] for r in made["runs"])
    assert (await api.get("/tenants/acme/runs?group=" + str(uuid.uuid4()), headers=auth)).json()["runs"] == []


async def test_completion_is_one_run_with_the_counts_under_concurrent_finishers_and_engines(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, settings: Settings
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "report", auth)
    made = await batch(api, auth, 40, {"name": "wide", "on_complete": {"job": "report"}})
    ids = [r["id"] for r in made["runs"]]
    statuses = ["succeeded"] * 25 + ["failed"] * 10 + ["cancelled"] * 4 + ["expired"]
    await end_concurrently(pool, ids, statuses)
    group = await group_of(api, auth, made["group_id"])
    assert group["completed_at"] is not None and group["pending"] == 0
    assert (group["succeeded"], group["failed"], group["cancelled"], group["expired"]) == (25, 10, 4, 1)
    # Four engines' passes at once: one run of `report`, however they interleave, and none after.
    firers = [GroupFirer(settings, pool) for _ in range(4)]
    await asyncio.gather(*(f.fire_once() for f in firers))
    await asyncio.gather(*(f.fire_once() for f in firers))
    runs = await pool.fetch("SELECT * FROM job_runs WHERE job = 'report'")
    assert len(runs) == 1
    fired = await group_of(api, auth, made["group_id"])
    assert fired["completion_run_id"] == str(runs[0]["id"]) and fired["fired_at"] is not None
    completion = (await api.get(f"/runs/{runs[0]['id']}", headers=auth)).json()
    assert completion["payload"] == {
        "group": {
            "id": made["group_id"],
            "name": "wide",
            "succeeded": 25,
            "failed": 10,
            "cancelled": 4,
            "expired": 1,
            "total": 40,
        }
    }


async def test_many_groups_ended_by_overlapping_statements_complete_once_each(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    """Statements each ending runs of several groups, in opposite orders, at once: every group
    completes once, no deadlock (the trigger locks groups in id order)."""
    auth = tenant["auth"]
    groups = [await batch(api, auth, 10, {"name": f"g{i}"}) for i in range(6)]
    everything = [r["id"] for g in groups for r in g["runs"]]
    slices = [everything[i::5] for i in range(5)]

    async def end(ids: list[str], backwards: bool) -> None:
        async with pool.acquire() as conn:
            await conn.execute(
                "UPDATE job_runs SET status = 'succeeded' WHERE id = ANY($1::uuid[])",
                sorted(ids, reverse=backwards),
            )

    await asyncio.gather(*(end(s, i % 2 == 1) for i, s in enumerate(slices)))
    rows = await pool.fetch("SELECT succeeded, total, completed_at FROM run_groups")
    assert len(rows) == 6 and all(r["succeeded"] == 10 == r["total"] and r["completed_at"] for r in rows)


async def test_a_run_joins_an_open_group_and_holds_its_completion(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    made = await batch(api, auth, 2, {"name": "open"})
    r = await api.post(
        "/tenants/acme/runs", json={"job": "hello", "group": {"id": made["group_id"]}}, headers=auth
    )
    assert r.status_code == 201, r.text
    joined = r.json()
    assert joined["group_id"] == made["group_id"]
    more = await batch(api, auth, 2, {"id": made["group_id"]})
    assert more["group_id"] == made["group_id"]
    assert (await group_of(api, auth, made["group_id"]))["total"] == 5
    await end_concurrently(pool, [x["id"] for x in made["runs"] + more["runs"]], ["succeeded"] * 4)
    assert (await group_of(api, auth, made["group_id"]))["completed_at"] is None  # `joined` is live
    await end_concurrently(pool, [joined["id"]], ["cancelled"])
    done = await group_of(api, auth, made["group_id"])
    assert done["completed_at"] is not None and (done["succeeded"], done["cancelled"]) == (4, 1)
    # Completed: nothing joins it, and nothing is written trying.
    before = await snapshot(pool)
    r = await api.post(
        "/tenants/acme/runs", json={"job": "hello", "group": {"id": made["group_id"]}}, headers=auth
    )
    assert_error(r, 409, "conflict", "group.id")
    r = await api.post(
        "/tenants/acme/runs/batch",
        json={"runs": [{"job": "hello"}], "group": {"id": made["group_id"]}},
        headers=auth,
    )
    assert_error(r, 409, "conflict", "group.id")
    assert await snapshot(pool) == before
    # A run retried after completion changes nothing of the group.
    await pool.execute("UPDATE job_runs SET status = 'pending' WHERE id = $1", uuid.UUID(joined["id"]))
    assert (await group_of(api, auth, made["group_id"]))["cancelled"] == 1


async def test_a_join_racing_the_last_finish_is_either_refused_or_counted(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    for _ in range(10):
        made = await batch(api, auth, 1, {"name": "race"})

        async def join(group_id: str) -> int:
            r = await api.post(
                "/tenants/acme/runs", json={"job": "hello", "group": {"id": group_id}}, headers=auth
            )
            return r.status_code

        status, _ = await asyncio.gather(
            join(made["group_id"]), end_concurrently(pool, [made["runs"][0]["id"]], ["succeeded"])
        )
        group = await group_of(api, auth, made["group_id"])
        members = await pool.fetchval(
            "SELECT count(*) FROM job_runs WHERE group_id = $1", uuid.UUID(made["group_id"])
        )
        assert group["total"] == members
        if status == 409:
            assert members == 1 and group["completed_at"] is not None
        else:
            assert status == 201 and members == 2 and group["completed_at"] is None


async def test_group_input_is_checked_and_scoped_to_its_tenant(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    before = await snapshot(pool)
    cases = [
        ({"name": "g", "on_complete": {"job": "missing"}}, "group.on_complete.job"),
        ({"name": "g", "on_complete": {}}, "group.on_complete"),
        (
            {"name": "g", "on_complete": {"job": "hello", "callback": {"url": "https://example.com"}}},
            "group.on_complete",
        ),
        ({"name": "bad name!"}, None),
        ({"name": "x" * 129}, None),
        ({}, "group.name"),
        ({"id": str(uuid.uuid4())}, "group.id"),
        ({"id": str(uuid.uuid4()), "name": "both"}, "group"),
    ]
    for group, field in cases:
        r = await api.post(
            "/tenants/acme/runs/batch", json={"runs": [{"job": "hello"}], "group": group}, headers=auth
        )
        assert_error(r, 422, "invalid_input", field)
    r = await api.post("/tenants/acme/runs", json={"job": "hello", "group": {"name": "new"}}, headers=auth)
    assert r.status_code == 422, r.text
    r = await api.post(
        "/tenants/acme/runs/batch",
        json={"runs": [{"job": "hello", "group": {"id": str(uuid.uuid4())}}]},
        headers=auth,
    )
    assert_error(r, 422, "invalid_input", "runs[0].group")
    assert await snapshot(pool) == before
    # Another tenant's group: not found, not joinable.
    made = await batch(api, auth, 1, {"name": "mine"})
    other = await create_tenant(api, "other")
    other_auth = {"Authorization": f"Bearer {other['api_key']}"}
    await put_job(api, "other", "hello", other_auth)
    r = await api.get(f"/tenants/other/groups/{made['group_id']}", headers=other_auth)
    assert_error(r, 404, "not_found")
    r = await api.get(f"/tenants/acme/groups/{made['group_id']}", headers=other_auth)
    assert r.status_code in (401, 403, 404)
    r = await api.post(
        "/tenants/other/runs", json={"job": "hello", "group": {"id": made["group_id"]}}, headers=other_auth
    )
    assert_error(r, 422, "invalid_input", "group.id")
    assert await count_rows(pool, "run_groups") == 1


async def test_a_replayed_batch_makes_no_second_group(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    body = {
        "runs": [{"job": "hello", "idempotency_key": f"k{i}"} for i in range(3)],
        "group": {"name": "once"},
    }
    first = await api.post("/tenants/acme/runs/batch", json=body, headers=auth)
    again = await api.post("/tenants/acme/runs/batch", json=body, headers=auth)
    assert first.status_code == again.status_code == 201, again.text
    assert again.json()["created"] == [False] * 3
    assert again.json()["group_id"] == first.json()["group_id"]
    assert await count_rows(pool, "run_groups") == 1


async def test_completion_over_the_quota_waits_and_is_made_later(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, settings: Settings
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "report", auth)
    made = await batch(api, auth, 2, {"name": "full", "on_complete": {"job": "report"}})
    await end_concurrently(pool, [r["id"] for r in made["runs"]], ["succeeded"] * 2)
    await batch(api, auth, 3, {"name": "filler"}, scheduled_at=later())  # 3 pending: the quota below
    firer = GroupFirer(settings.model_copy(update={"tenant_max_pending": 3}), pool)
    await firer.fire_once()
    held = await group_of(api, auth, made["group_id"])
    assert held["fired_at"] is None and "backlog quota" in held["fire_error"]
    assert await pool.fetchval("SELECT count(*) FROM job_runs WHERE job = 'report'") == 0
    await pool.execute("UPDATE run_groups SET fire_due_at = now() WHERE id = $1", uuid.UUID(made["group_id"]))
    await GroupFirer(settings, pool).fire_once()
    fired = await group_of(api, auth, made["group_id"])
    assert fired["fired_at"] is not None and fired["completion_run_id"] and fired["fire_error"] is None


async def test_an_engine_killed_after_submitting_the_completion_run_leaves_no_second_one(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, settings: Settings
) -> None:
    """What an engine killed between the completion run's commit and fired_at's leaves behind: the
    run, and the group still owed. The next pass is answered with that run (its idempotency key)."""
    auth = tenant["auth"]
    await put_job(api, "acme", "report", auth)
    made = await batch(api, auth, 2, {"name": "crash", "on_complete": {"job": "report"}})
    await end_concurrently(pool, [r["id"] for r in made["runs"]], ["succeeded", "failed"])
    group = await pool.fetchrow("SELECT * FROM run_groups WHERE id = $1", uuid.UUID(made["group_id"]))
    firer = GroupFirer(settings, pool)
    request = RunRequest("report", None, completion_payload(group), f"group:{group['id']}", "on_complete.")
    [orphan] = await submit(pool, firer.admission, "acme", [request], None)  # then the engine died
    assert (await group_of(api, auth, made["group_id"]))["fired_at"] is None
    await firer.fire_once()
    fired = await group_of(api, auth, made["group_id"])
    assert fired["completion_run_id"] == str(orphan.run["id"])
    assert await pool.fetchval("SELECT count(*) FROM job_runs WHERE job = 'report'") == 1


async def test_a_callback_group_queues_one_outbox_row_under_racing_engines(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, settings: Settings
) -> None:
    auth = tenant["auth"]
    on_complete = {"callback": {"url": "http://127.0.0.1:9/hook"}}
    async with api_client(settings, allow_private_targets=True) as private:
        r = await private.post(
            "/tenants/acme/runs/batch",
            json={"runs": [{"job": "hello"}] * 3, "group": {"name": "cb", "on_complete": on_complete}},
            headers=auth,
        )
    assert r.status_code == 201, r.text
    group_id = r.json()["group_id"]
    assert (await group_of(api, auth, group_id))["callback"]["status"] is None
    await end_concurrently(pool, [x["id"] for x in r.json()["runs"]], ["succeeded"] * 3)
    firers = [GroupFirer(settings, pool) for _ in range(3)]
    await asyncio.gather(*(f.fire_once() for f in firers))
    await asyncio.gather(*(f.fire_once() for f in firers))
    rows = await pool.fetch("SELECT * FROM run_callbacks WHERE group_id = $1", uuid.UUID(group_id))
    assert len(rows) == 1 and rows[0]["run_id"] is None and rows[0]["url"] == "http://127.0.0.1:9/hook"
    assert (await group_of(api, auth, group_id))["callback"]["status"] == "pending"


async def test_groups_fired_before_the_retention_go(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, settings: Settings
) -> None:
    auth = tenant["auth"]
    old = await batch(api, auth, 1, {"name": "old"})
    recent = await batch(api, auth, 1, {"name": "recent"})
    await end_concurrently(pool, [old["runs"][0]["id"], recent["runs"][0]["id"]], ["succeeded"] * 2)
    firer = GroupFirer(settings, pool)
    await firer.fire_once()
    await pool.execute(
        "UPDATE run_groups SET fired_at = now() - make_interval(days => $2) WHERE id = $1",
        uuid.UUID(old["group_id"]),
        settings.retention_days + 1,
    )
    assert await GroupPruner(settings, pool).step() == 1
    assert await pool.fetchval("SELECT array_agg(name) FROM run_groups") == ["recent"]


async def test_the_dashboard_shows_a_groups_progress_and_filters_runs_by_group(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    made = await batch(api, auth, 3, {"name": "shown"})
    other = await batch(api, auth, 1, {"name": "elsewhere"})
    await end_concurrently(pool, [made["runs"][0]["id"]], ["failed"])
    ui = await ui_sign_in(str(api.base_url), tenant["api_key"])
    try:
        page = await ui.get(f"/ui/groups/{made['group_id']}")
        assert page.status_code == 200, page.text
        assert '<dd id="group-pending">2</dd>' in page.text and '<dd id="group-failed">1</dd>' in page.text
        assert all(r["id"] in page.text for r in made["runs"]) and other["runs"][0]["id"] not in page.text
        runs = await ui.get(f"/ui/runs?group={made['group_id']}")
        assert all(r["id"] in runs.text for r in made["runs"]) and other["runs"][0]["id"] not in runs.text
        listed = await ui.get("/ui/groups")
        assert made["group_id"] in listed.text and other["group_id"] in listed.text
        assert (await ui.get("/ui/runs?group=not-a-group")).status_code == 422
    finally:
        await ui.aclose()
