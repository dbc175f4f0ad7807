"""Tags and metadata over real HTTP and Postgres: what may be sent (a 422 naming the field, nothing
written), what a run carries (its job's default tags and its own, its metadata) submitted alone or
in a batch, the listing by tag, and bulk actions by tag (cron, the dashboard and callbacks:
test_run_tags_elsewhere.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from tests.support import assert_error, create_tenant, put_job, snapshot, submit_run

TOO_DEEP: dict = {}
_level = TOO_DEEP
for _ in range(40):
    _level["k"] = {}
    _level = _level["k"]

BAD_FIELDS = [
    ({"tags": [f"t{n}" for n in range(11)]}, "tags"),
    ({"tags": ["has space"]}, "tags[0]"),
    ({"tags": ["ok", "comma,inside"]}, "tags[1]"),
    ({"tags": ["x" * 65]}, "tags[0]"),
    ({"tags": [""]}, "tags[0]"),
    ({"tags": "one"}, "tags"),
    ({"tags": [7]}, "tags[0]"),
    ({"metadata": ["not", "an", "object"]}, "metadata"),
    ({"metadata": "text"}, "metadata"),
    ({"metadata": {"big": "x" * 4100}}, "metadata"),
    ({"metadata": TOO_DEEP}, "metadata"),
    ({"metadata": {"nul": "a\u0000b"}}, "metadata"),
]


@pytest.mark.parametrize(("fields", "field"), BAD_FIELDS)
async def test_bad_tags_or_metadata_are_a_422_naming_the_field_and_write_nothing(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, fields: dict, field: str
) -> None:
    auth = tenant["auth"]
    before = await snapshot(pool)
    r = await api.post("/tenants/acme/runs", json={"job": "hello", **fields}, headers=auth)
    assert_error(r, 422, "invalid_input", field)
    batch = {"runs": [{"job": "hello", "tags": ["fine"]}, {"job": "hello", **fields}]}
    r = await api.post("/tenants/acme/runs/batch", json=batch, headers=auth)
    assert_error(r, 422, "invalid_input", f"runs[1].{field}")
    if "tags" in fields:  # a job's default tags follow the same rule
        r = await api.put(
            "/tenants/acme/jobs/tagged", json={"target": {"type": "noop"}, **fields}, headers=auth
        )
        assert_error(r, 422, "invalid_input", field)
    assert await snapshot(pool) == before


async def test_more_than_ten_tags_with_the_jobs_is_a_422_and_writes_nothing(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "tagged", auth, tags=[f"job{n}" for n in range(6)])
    before = await snapshot(pool)
    five_more = [f"run{n}" for n in range(5)]
    r = await api.post("/tenants/acme/runs", json={"job": "tagged", "tags": five_more}, headers=auth)
    problem = assert_error(r, 422, "invalid_input", "tags")
    assert "11" in str(problem["detail"]), problem
    batch = {"runs": [{"job": "hello", "tags": five_more}, {"job": "tagged", "tags": five_more}]}
    r = await api.post("/tenants/acme/runs/batch", json=batch, headers=auth)
    assert_error(r, 422, "invalid_input", "runs[1].tags")
    assert await snapshot(pool) == before
    # Tags the job already names count once: six and four new make ten.
    ten = await submit_run(api, "acme", auth, job="tagged", tags=["job0", "job1", *five_more[:4]])
    assert ten["tags"] == [*(f"job{n}" for n in range(6)), *five_more[:4]]


async def test_tags_and_metadata_round_trip_one_batch_and_job_defaults(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    one = await submit_run(
        api, "acme", auth, job="hello", tags=["b", "a:1/x", "b"], metadata={"order": 7, "by": ["x"]}
    )
    assert one["tags"] == ["b", "a:1/x"] and one["metadata"] == {"order": 7, "by": ["x"]}
    assert (await api.get(f"/runs/{one['id']}", headers=auth)).json() == one
    plain = await submit_run(api, "acme", auth, job="hello")
    assert plain["tags"] == [] and plain["metadata"] is None

    job = await put_job(api, "acme", "tagged", auth, tags=["team:data", "nightly", "team:data"])
    assert job["tags"] == ["team:data", "nightly"]
    assert (await api.get("/tenants/acme/jobs/tagged", headers=auth)).json()["tags"] == job["tags"]
    batch = {
        "runs": [
            {"job": "tagged"},
            {"job": "tagged", "tags": ["nightly", "extra"], "metadata": {"n": 1}},
            {"job": "hello", "tags": ["extra"]},
        ]
    }
    r = await api.post("/tenants/acme/runs/batch", json=batch, headers=auth)
    assert r.status_code == 201, r.text
    runs = r.json()["runs"]
    assert [run["tags"] for run in runs] == [
        ["team:data", "nightly"],
        ["team:data", "nightly", "extra"],
        ["extra"],
    ]
    assert [run["metadata"] for run in runs] == [None, {"n": 1}, None]
    listed = (await api.get("/tenants/acme/runs", headers=auth)).json()["runs"]
    assert {run["id"]: (run["tags"], run["metadata"]) for run in listed} == {
        run["id"]: (run["tags"], run["metadata"]) for run in [one, plain, *runs]
    }
    # One row per run and tag beside the runs; an untagged run has none.
    rows = await pool.fetch("SELECT run_id, tag FROM run_tags")
    assert sorted((str(r["run_id"]), r["tag"]) for r in rows) == sorted(
        (run["id"], tag) for run in [one, plain, *runs] for tag in run["tags"]
    )
    assert await pool.fetchval(
        "SELECT tags IS NULL AND metadata IS NULL FROM job_runs WHERE id = $1", plain["id"]
    )

    # An idempotent replay answers the same run; other tags under the same key are another body.
    keyed = {"job": "hello", "tags": ["k"], "metadata": {"m": 1}, "idempotency_key": "key-1"}
    first = await api.post("/tenants/acme/runs", json=keyed, headers=auth)
    again = await api.post("/tenants/acme/runs", json=keyed, headers=auth)
    assert (first.status_code, again.status_code) == (201, 200) and again.json() == first.json()
    r = await api.post("/tenants/acme/runs", json={**keyed, "tags": ["other"]}, headers=auth)
    assert_error(r, 422, "invalid_input", "idempotency_key")


async def test_the_listing_by_tag_keeps_runs_carrying_every_tag_given(
    api: httpx.AsyncClient, tenant: dict
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "other", auth)
    start = datetime.now(UTC) - timedelta(days=2)  # over three days' partitions
    spec = [["a"], ["a", "b"], ["b"], [], ["a", "b", "c"], ["a"]]
    made = [
        await submit_run(
            api,
            "acme",
            auth,
            job="other" if n == 4 else "hello",
            tags=tags,
            scheduled_at=(start + timedelta(hours=9 * n)).isoformat(),
        )
        for n, tags in enumerate(spec)
    ]
    newest_first = [run["id"] for run in reversed(made)]

    async def listed(*tags: str, **params: object) -> list[str]:
        r = await api.get("/tenants/acme/runs", params={"tag": list(tags), **params}, headers=auth)
        assert r.status_code == 200, r.text
        return [run["id"] for run in r.json()["runs"]]

    assert await listed("a") == [i for i in newest_first if "a" in made_tags(made, i)]
    assert await listed("a", "b") == [made[4]["id"], made[1]["id"]]
    assert await listed("b", "a", "a") == [made[4]["id"], made[1]["id"]]
    assert await listed("a", "b", job="hello") == [made[1]["id"]]
    assert await listed("zzz") == []
    # Paged one by one through the cursor: the same runs, in the same order.
    paged, cursor = [], None
    while True:
        r = await api.get(
            "/tenants/acme/runs",
            params={"tag": "a", "limit": 1, **({"cursor": cursor} if cursor else {})},
            headers=auth,
        )
        page = r.json()
        paged += [run["id"] for run in page["runs"]]
        if (cursor := page["next_cursor"]) is None:
            break
    assert paged == await listed("a")
    # Another tenant's runs with the same tag are not listed.
    beta = await create_tenant(api, "beta")
    beta_auth = {"Authorization": f"Bearer {beta['api_key']}"}
    await put_job(api, "beta", "hello", beta_auth)
    await submit_run(api, "beta", beta_auth, job="hello", tags=["a"])
    assert len(await listed("a")) == 4

    r = await api.get("/tenants/acme/runs", params={"tag": [f"t{n}" for n in range(11)]}, headers=auth)
    assert_error(r, 422, "invalid_input", "tag")
    r = await api.get("/tenants/acme/runs", params={"tag": ["ok", "not ok"]}, headers=auth)
    assert_error(r, 422, "invalid_input", "tag[1]")


def made_tags(made: list[dict], run_id: str) -> list[str]:
    return next(run["tags"] for run in made if run["id"] == run_id)


async def test_bulk_cancel_by_tags_cancels_only_runs_carrying_them(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    made = [
        await submit_run(api, "acme", auth, job="hello", tags=tags) for tags in (["x"], ["x", "y"], ["y"], [])
    ]
    body = {"action": "cancel", "filter": {"tags": ["y", "x"]}}
    r = await api.post("/tenants/acme/runs/actions", json=body, headers=auth)
    assert r.status_code == 200, r.text
    assert r.json() == {"matched": 1, "changed": 1, "next_cursor": None}
    statuses = dict(await pool.fetch("SELECT id::text, status FROM job_runs"))
    assert [statuses[run["id"]] for run in made] == ["pending", "cancelled", "pending", "pending"]
    r = await api.post(
        "/tenants/acme/runs/actions", json={"action": "cancel", "filter": {"tags": ["x"]}}, headers=auth
    )
    assert r.json()["changed"] == 1  # the other one carrying x; the cancelled one is not changed twice
    # A retry keeps a run's tags: retried by tag, both are pending again and still found by it.
    r = await api.post(
        "/tenants/acme/runs/actions", json={"action": "retry", "filter": {"tags": ["x"]}}, headers=auth
    )
    assert r.json()["changed"] == 2
    again = (await api.get("/tenants/acme/runs", params={"tag": "x"}, headers=auth)).json()["runs"]
    assert {(run["id"], run["status"], tuple(run["tags"])) for run in again} == {
        (made[1]["id"], "pending", ("x", "y")),
        (made[0]["id"], "pending", ("x",)),
    }
    before = await snapshot(pool)
    for tags, field in ((["bad tag"], "filter.tags[0]"), ([], "filter.tags")):
        r = await api.post(
            "/tenants/acme/runs/actions", json={"action": "cancel", "filter": {"tags": tags}}, headers=auth
        )
        assert_error(r, 422, "invalid_input", field)
    assert await snapshot(pool) == before
