"""Run dependencies (migration 0023) against real Postgres, through the API and the fenced
transitions the engine and the worker use: a graph submitted in one batch, refused references that
write nothing, the release in the statement that records a parent's success (honouring a pause),
the transitive cancel cascade, on_parent_failure "run", a retry that waits again, and the counts."""

from __future__ import annotations

import uuid

import asyncpg
import httpx
import orjson

from app.config import Settings
from app.db import transitions
from app.domain import StoredResult
from app.engine.claims import claim_scan
from app.engine.floor import ClaimBounds
from tests.integration.test_run_history import Outcome, fence_of
from tests.support import bearer, create_tenant, put_job, submit_run
from tests.ui_support import ui_sign_in


async def batch(api: httpx.AsyncClient, auth: dict, runs: list[dict], tenant: str = "acme") -> httpx.Response:
    return await api.post(f"/tenants/{tenant}/runs/batch", json={"runs": runs}, headers=auth)


async def count_runs(pool: asyncpg.Pool) -> tuple[int, int]:
    runs = await pool.fetchval("SELECT count(*) FROM job_runs")
    edges = await pool.fetchval("SELECT count(*) FROM run_dependencies")
    return runs, edges


async def finish(
    pool: asyncpg.Pool, settings: Settings, outcomes: dict[uuid.UUID, Outcome]
) -> set[uuid.UUID]:
    """Claims and starts every due run, finishes those named (the rest succeed), in one statement.
    Answers the ids claimed."""
    async with pool.acquire() as conn:
        claimed = await claim_scan(conn, settings, ClaimBounds())
        if not claimed:
            return set()
        await transitions.start_runs(
            conn, fence_of(claimed), [False] * len(claimed), owner="w1", lease_seconds=30
        )
        await transitions.finish_runs(
            conn, fence_of(claimed), [outcomes.get(r["id"], Outcome(ok=True)) for r in claimed]
        )
    return {r["id"] for r in claimed}


async def read(api: httpx.AsyncClient, auth: dict, run_id: object) -> dict:
    r = await api.get(f"/runs/{run_id}", headers=auth)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def test_a_graph_in_one_batch_runs_in_order(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    r = await batch(
        api,
        auth,
        [
            {"job": "hello", "ref": "extract"},
            {"job": "hello", "ref": "a", "depends_on": ["extract"]},
            {"job": "hello", "ref": "b", "depends_on": ["extract"]},
            {"job": "hello", "ref": "load", "depends_on": ["a", "b"]},
        ],
    )
    assert r.status_code == 201, r.text
    extract, a, b, load = r.json()["runs"]
    assert (extract["held"], extract["dependents"], extract["depends_on"]) == (None, 2, [])
    assert (a["held"], a["depends_on"]) == ("dependencies", [extract["id"]])
    assert (load["held"], load["depends_on"]) == ("dependencies", [a["id"], b["id"]])

    assert await finish(pool, settings, {}) == {uuid.UUID(extract["id"])}
    # Released in the statement that recorded the success: a and b are claimed next, load waits.
    assert (await read(api, auth, a["id"]))["held"] is None
    assert await finish(pool, settings, {}) == {uuid.UUID(a["id"]), uuid.UUID(b["id"])}
    assert await finish(pool, settings, {}) == {uuid.UUID(load["id"])}
    assert (await read(api, auth, load["id"]))["status"] == "succeeded"
    assert (await read(api, auth, extract["id"]))["dependents"] == 2


async def test_forward_references_cycles_and_unknown_parents_write_nothing(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    before = await count_runs(pool)
    cases = [
        (
            [{"job": "hello", "ref": "a", "depends_on": ["b"]}, {"job": "hello", "ref": "b"}],
            "runs[0].depends_on[0]",
        ),
        ([{"job": "hello", "ref": "a", "depends_on": ["a"]}], "runs[0].depends_on[0]"),
        (
            [
                {"job": "hello", "ref": "a", "depends_on": ["b"]},
                {"job": "hello", "ref": "b", "depends_on": ["a"]},
            ],
            "runs[0].depends_on[0]",
        ),
        ([{"job": "hello", "ref": "a"}, {"job": "hello", "ref": "a"}], "runs[1].ref"),
        ([{"job": "hello"}, {"job": "hello", "depends_on": ["nope"]}], "runs[1].depends_on[0]"),
        ([{"job": "hello", "ref": "x"}, {"job": "hello", "depends_on": ["x", "x"]}], "runs[1].depends_on[1]"),
        ([{"job": "hello"}, {"job": "hello", "depends_on": [str(uuid.uuid4())]}], "runs[1].depends_on[0]"),
        # An id no run can have (its time past year 9999) is unknown too, not a 500.
        ([{"job": "hello", "depends_on": ["ffffffff-ffff-7fff-bfff-ffffffffffff"]}], "runs[0].depends_on[0]"),
    ]
    for runs, field in cases:
        r = await batch(api, auth, runs)
        assert r.status_code == 422, r.text
        assert r.json()["field"] == field, (runs, r.json())
    r = await batch(api, auth, [{"job": "hello", "depends_on": [str(uuid.uuid4())] * 101}])
    assert r.status_code == 422 and "depends_on" in r.json().get("field", r.text), r.text
    assert await count_runs(pool) == before


async def test_another_tenants_run_is_not_a_parent(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    other = await create_tenant(api, "other")
    other_auth = bearer(other["api_key"])
    await put_job(api, "other", "hello", other_auth)
    theirs = await submit_run(api, "other", other_auth, job="hello")
    before = await count_runs(pool)
    r = await batch(api, tenant["auth"], [{"job": "hello"}, {"job": "hello", "depends_on": [theirs["id"]]}])
    assert r.status_code == 422 and r.json()["field"] == "runs[1].depends_on[0]", r.text
    assert "does not exist" in r.json()["detail"]
    assert await count_runs(pool) == before
    assert (await read(api, other_auth, theirs["id"]))["dependents"] == 0


async def test_a_failed_parent_cancels_its_dependents_transitively(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    r = await batch(
        api,
        auth,
        [
            {"job": "hello", "ref": "root"},
            {"job": "hello", "ref": "mid", "depends_on": ["root"]},
            {"job": "hello", "ref": "leaf", "depends_on": ["mid"]},
            {"job": "hello", "ref": "anyway", "depends_on": ["mid"], "on_parent_failure": "run"},
        ],
    )
    root, mid, leaf, anyway = r.json()["runs"]
    await finish(pool, settings, {uuid.UUID(root["id"]): Outcome(ok=False, error="boom")})
    # Failed until it has no attempt left.
    while (await read(api, auth, root["id"]))["status"] == "pending":
        await pool.execute("UPDATE job_runs SET due_at = now() WHERE id = $1", uuid.UUID(root["id"]))
        await finish(pool, settings, {uuid.UUID(root["id"]): Outcome(ok=False, error="boom")})
    assert (await read(api, auth, root["id"]))["status"] == "failed"
    got_mid, got_leaf = await read(api, auth, mid["id"]), await read(api, auth, leaf["id"])
    assert (got_mid["status"], got_mid["last_error"]) == ("cancelled", f"parent {root['id']} ended failed")
    assert (got_leaf["status"], got_leaf["last_error"]) == (
        "cancelled",
        f"parent {mid['id']} ended cancelled",
    )
    # "run": released once its parent ended, however it ended.
    got = await read(api, auth, anyway["id"])
    assert (got["status"], got["held"]) == ("pending", None)
    assert await finish(pool, settings, {}) == {uuid.UUID(anyway["id"])}


async def test_a_parent_already_ended_at_submission(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    done = await submit_run(api, "acme", auth, job="hello")
    await finish(pool, settings, {})
    gone = await submit_run(api, "acme", auth, job="hello")
    assert (await api.post(f"/runs/{gone['id']}/cancel", headers=auth)).status_code == 200
    r = await batch(
        api,
        auth,
        [
            {"job": "hello", "depends_on": [done["id"]]},
            {"job": "hello", "ref": "c", "depends_on": [done["id"], gone["id"]]},
            {"job": "hello", "depends_on": ["c"]},
            {"job": "hello", "depends_on": [gone["id"]], "on_parent_failure": "run"},
        ],
    )
    assert r.status_code == 201, r.text
    free, cancelled, below, anyway = r.json()["runs"]
    assert (free["status"], free["held"]) == ("pending", None)
    assert (cancelled["status"], cancelled["last_error"]) == (
        "cancelled",
        f"parent {gone['id']} ended cancelled",
    )
    assert below["status"] == "cancelled"
    assert (anyway["status"], anyway["held"]) == ("pending", None)


async def test_a_released_run_of_a_paused_job_stays_held_paused(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "later", auth)
    parent = await submit_run(api, "acme", auth, job="hello")
    child = (await batch(api, auth, [{"job": "later", "depends_on": [parent["id"]]}])).json()["runs"][0]
    assert (await api.post("/tenants/acme/jobs/later/pause", headers=auth)).status_code == 200
    assert (await read(api, auth, child["id"]))["held"] == "dependencies"
    await finish(pool, settings, {})
    assert (await read(api, auth, child["id"]))["held"] == "paused"
    assert await finish(pool, settings, {}) == set()
    assert (await api.post("/tenants/acme/jobs/later/resume", headers=auth)).status_code == 200
    assert await finish(pool, settings, {}) == {uuid.UUID(child["id"])}


async def test_a_retried_dependent_waits_for_its_parents_again(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    parent = await submit_run(api, "acme", auth, job="hello")
    child = (await batch(api, auth, [{"job": "hello", "depends_on": [parent["id"]]}])).json()["runs"][0]
    assert (await api.post(f"/runs/{child['id']}/cancel", headers=auth)).json()["status"] == "cancelled"
    retried = (await api.post(f"/runs/{child['id']}/retry", headers=auth)).json()
    assert (retried["status"], retried["held"]) == ("pending", "dependencies")
    assert await finish(pool, settings, {}) == {uuid.UUID(parent["id"])}
    assert await finish(pool, settings, {}) == {uuid.UUID(child["id"])}


async def test_results_are_passed_by_ref_and_id(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    old = await submit_run(api, "acme", auth, job="hello")
    await finish(pool, settings, {uuid.UUID(old["id"]): Outcome(ok=True, result=result({"n": 1}))})
    r = await batch(
        api,
        auth,
        [
            {"job": "hello", "ref": "new"},
            {"job": "hello", "depends_on": ["new", old["id"]], "pass_results": True},
        ],
    )
    new, child = r.json()["runs"]
    await finish(pool, settings, {uuid.UUID(new["id"]): Outcome(ok=True, result=result([2]))})
    target = await pool.fetchval("SELECT target FROM job_runs WHERE id = $1", uuid.UUID(child["id"]))
    assert target["pass_results"] is True
    from app.db.dependencies import parent_results

    async with pool.acquire() as conn:
        assert await parent_results(conn, uuid.UUID(child["id"])) == {"new": [2], old["id"]: {"n": 1}}


def result(value: object) -> StoredResult:
    return StoredResult(orjson.dumps(value).decode(), False)


async def test_a_runs_page_links_its_parents_and_dependents(api: httpx.AsyncClient, tenant: dict) -> None:
    auth = tenant["auth"]
    r = await batch(api, auth, [{"job": "hello", "ref": "p"}, {"job": "hello", "depends_on": ["p"]}])
    parent, child = r.json()["runs"]
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    try:
        parent_page = (await browser.get(f"/ui/runs/{parent['id']}")).text
        child_page = (await browser.get(f"/ui/runs/{child['id']}")).text
    finally:
        await browser.aclose()
    assert f'href="/ui/runs/{child["id"]}"' in parent_page.split('id="dependents"')[1].split("</dd>")[0]
    assert f'href="/ui/runs/{parent["id"]}"' in child_page.split('id="depends-on"')[1].split("</dd>")[0]
