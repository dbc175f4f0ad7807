"""Client and AsyncClient (each test runs with both) against the live API: jobs, runs through to
their end, listings across pages, cancel and retry, keys, dependencies, groups and events, and the
API's problems as ApiError."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from scheduler_client import ApiError, Job, Run, RunStatus

from tests.clients.conftest import Account, Calls, Live

LATER = datetime.now(UTC) + timedelta(hours=1)


async def test_a_run_is_submitted_waited_for_and_read(live: Live, account: Account, client: Calls) -> None:
    await live.worker()
    job = await client.call(
        "put_job", account.id, "report", target={"type": "http", "url": live.receiver.url}
    )
    assert isinstance(job, Job) and job.name == "report"

    run = await client.call("submit_run", account.id, "report", {"user": 42})
    assert isinstance(run, Run) and run.status == RunStatus.PENDING and run.idempotency_key
    done = await client.call("wait", run.id, timeout=30)
    assert (done.id, done.status, done.attempt) == (run.id, "succeeded", 1)
    assert (await client.call("get_run", str(run.id))).status == RunStatus.SUCCEEDED
    [call] = live.receiver.for_run(str(run.id))
    assert call.payload == {"user": 42}

    # A trigger is a run of the job now, with the job's payload.
    await client.call(
        "put_job", account.id, "report", target={"type": "http", "url": live.receiver.url}, payload={"d": 1}
    )
    triggered = await client.call(
        "wait", (await client.call("trigger_job", account.id, "report")).id, timeout=30
    )
    assert triggered.status == RunStatus.SUCCEEDED and triggered.payload == {"d": 1}


async def test_listings_go_across_pages(live: Live, account: Account, client: Calls) -> None:
    await client.call("put_job", account.id, "later", target={"type": "noop"})
    runs = await client.call(
        "submit_batch",
        account.id,
        [{"job": "later", "scheduled_at": LATER + timedelta(minutes=i)} for i in range(5)],
    )
    assert len(runs) == 5 and all(r.idempotency_key for r in runs)
    # Two a page: three pages, newest scheduled first.
    listed = await client.collect("list_runs", account.id, limit=2, job="later")
    assert [r.id for r in listed] == [r.id for r in reversed(runs)]
    assert await client.collect("list_runs", account.id, status="succeeded") == []

    for name in ("b", "c"):
        await client.call("put_job", account.id, name, target={"type": "noop"})
    jobs = await client.collect("list_jobs", account.id, page_size=1)
    assert [j.name for j in jobs] == ["b", "c", "later"]


async def test_a_run_is_cancelled_and_retried(live: Live, account: Account, client: Calls) -> None:
    await client.call("put_job", account.id, "later", target={"type": "noop"})
    run = await client.call("submit_run", account.id, "later", scheduled_at=LATER)
    moved = await client.call("reschedule_run", run.id, LATER + timedelta(hours=1))
    assert (moved.scheduled_at, moved.due_at - run.due_at) == (run.scheduled_at, timedelta(hours=1))
    cancelled = await client.call("cancel_run", run.id)
    assert cancelled.status == RunStatus.CANCELLED
    # wait returns at once: a cancelled run has ended.
    assert (await client.call("wait", run.id, timeout=1)).status == RunStatus.CANCELLED
    with pytest.raises(ApiError) as refused:
        await client.call("cancel_run", run.id)
    assert refused.value.status == 409

    # Its job paused, the retried run stays pending: a wait for it times out.
    await client.call("pause_job", account.id, "later")
    retried = await client.call("retry_run", run.id, max_attempts=5)
    assert (retried.status, retried.max_attempts) == (RunStatus.PENDING, 5)
    with pytest.raises(TimeoutError, match="still pending"):
        await client.call("wait", run.id, timeout=0.3)


async def test_a_job_is_paused_and_resumed(live: Live, account: Account, client: Calls) -> None:
    await client.call("put_job", account.id, "report", target={"type": "noop"}, schedule="*/5 * * * *")
    assert (await client.call("pause_job", account.id, "report")).paused is True
    assert (await client.call("get_job", account.id, "report")).paused is True
    assert (await client.call("resume_job", account.id, "report")).paused is False
    await client.call("delete_job", account.id, "report")
    with pytest.raises(ApiError) as gone:
        await client.call("get_job", account.id, "report")
    assert (gone.value.status, gone.value.code) == (404, "not_found")


async def test_problems_raise_api_error_with_their_details(
    live: Live, account: Account, client: Calls
) -> None:
    with pytest.raises(ApiError) as invalid:
        await client.call("submit_run", account.id, "no-such-job")
    error = invalid.value
    assert (error.status, error.code, error.field) == (422, "invalid_input", "job")
    assert "no-such-job" in error.detail and error.problem["status"] == 422

    with pytest.raises(ApiError) as missing:
        await client.call("get_run", uuid.uuid4())
    assert (missing.value.status, missing.value.code, missing.value.field) == (404, "not_found", "run_id")
    assert missing.value.detail

    # A field the contract does not know goes to the API, which names it.
    with pytest.raises(ApiError) as unknown:
        await client.call("put_job", account.id, "x", target={"type": "noop"}, max_attempt=3)
    assert (unknown.value.status, unknown.value.field) == (422, "max_attempt")

    # So does a required field missing, however deep.
    with pytest.raises(ApiError) as incomplete:
        await client.call("put_job", account.id, "x", target={"type": "http"})
    assert (incomplete.value.status, incomplete.value.field) == (422, "target.url")


async def test_keys_are_created_listed_and_revoked(
    live: Live, account: Account, client: Calls, make_client
) -> None:  # type: ignore[no-untyped-def]
    created = await client.call("create_key", account.id)
    other = make_client(live.url, created.api_key)
    listed = await other.call("list_keys", account.id)
    assert created.key_id in [k.key_id for k in listed] and len(listed) == 2
    await client.call("revoke_key", account.id, created.key_id)
    with pytest.raises(ApiError) as refused:
        await other.call("list_keys", account.id)
    assert (refused.value.status, refused.value.code) == (401, "unauthorized")
    # With no overlap given, the API's default overlap: no body at all.
    assert (await client.call("rotate_signing_secret", account.id)).signing_secret.startswith("whsec_")


async def test_a_scoped_key_is_refused_what_it_lacks_with_api_error_403(
    live: Live, account: Account, client: Calls, make_client
) -> None:  # type: ignore[no-untyped-def]
    await client.call("put_job", account.id, "hello", target={"type": "noop"})
    created = await client.call("create_key", account.id, ["runs:read", "jobs:read"])
    assert [s.value for s in created.scopes] == ["runs:read", "jobs:read"]
    read_only = make_client(live.url, created.api_key)
    assert [j.name for j in await read_only.collect("list_jobs", account.id)] == ["hello"]
    with pytest.raises(ApiError) as refused:
        await read_only.call("submit_run", account.id, "hello")
    error = refused.value
    assert (error.status, error.code, error.field) == (403, "forbidden", "Authorization")
    assert error.detail == "this API key lacks the scope runs:write"
    [listed] = [k for k in await client.call("list_keys", account.id) if k.key_id == created.key_id]
    assert [s.value for s in listed.scopes] == ["runs:read", "jobs:read"]


async def test_a_cron_jobs_occurrences_are_backfilled_once(
    live: Live, account: Account, client: Calls
) -> None:
    await client.call("put_job", account.id, "hourly", target={"type": "noop"}, schedule="0 * * * *")
    start = (datetime.now(UTC) + timedelta(days=2)).replace(hour=0, minute=0, second=0, microsecond=0)
    made = await client.call("backfill_job", account.id, "hourly", start, start + timedelta(hours=3))
    assert [r.scheduled_at for r in made.runs] == [start + timedelta(hours=h) for h in range(3)]
    assert made.existing == 0
    # Asked again, it makes nothing: every occurrence has its run.
    again = await client.call(
        "backfill_job", account.id, "hourly", start.isoformat(), start + timedelta(hours=3)
    )
    assert (again.runs, again.existing) == ([], 3)

    await client.call("put_job", account.id, "once", target={"type": "noop"})
    with pytest.raises(ApiError) as refused:
        await client.call("backfill_job", account.id, "once", start, start + timedelta(hours=1))
    assert refused.value.status == 409


async def test_the_audit_log_across_pages(live: Live, account: Account, client: Calls) -> None:
    for name in ("a", "b", "c"):
        await client.call("put_job", account.id, name, target={"type": "noop"})
    await client.call("pause_job", account.id, "b")
    events = await client.collect("list_audit_events", account.id, page_size=2)
    assert [(str(e.action), e.target) for e in events[:4]] == [
        ("job.paused", "job:b"),
        ("job.put", "job:c"),
        ("job.put", "job:b"),
        ("job.put", "job:a"),
    ]
    key_id = account.api_key.removeprefix("sch_").split("_", 1)[0]
    assert {(str(e.actor.type_), e.actor.id) for e in events[:4]} == {("key", key_id)}
    paused = await client.collect("list_audit_events", account.id, action="job.paused")
    assert [e.target for e in paused] == ["job:b"]


async def test_a_graph_in_a_group_its_progress_and_an_event(
    live: Live, account: Account, client: Calls
) -> None:
    await live.worker()
    await client.call("put_job", account.id, "step", target={"type": "noop"})
    await client.call(
        "put_job", account.id, "report", target={"type": "noop"}, payload={"d": 1}, on_events=["order.placed"]
    )
    # A graph in one batch, in a new group: `last` waits for the items named `a` and `b`.
    first, second, last = await client.call(
        "submit_batch",
        account.id,
        [
            {"job": "step", "ref": "a", "scheduled_at": LATER},
            {"job": "step", "ref": "b"},
            {"job": "step", "depends_on": ["a", "b"], "on_parent_failure": "run", "pass_results": True},
        ],
        group={"name": "graph", "on_complete": {"job": "report"}},
    )
    assert (last.depends_on, str(last.held)) == ([first.id, second.id], "dependencies")
    group_id = first.group_id
    assert group_id is not None and second.group_id == last.group_id == group_id
    # A single submission joins the open group and waits for a run by its id.
    joined = await client.call(
        "submit_run", account.id, "step", depends_on=[first.id], group={"id": group_id}
    )
    assert (joined.group_id, joined.depends_on, str(joined.held)) == (group_id, [first.id], "dependencies")
    group = await client.call("get_group", account.id, str(group_id))
    assert (group.name, group.total, group.completed_at) == ("graph", 4, None)

    # `a` cancelled: its `cancel` dependent ends with it; its `run` dependent runs once `b` has ended.
    await client.call("cancel_run", first.id)
    assert (await client.call("wait", joined.id, timeout=30)).status == RunStatus.CANCELLED
    assert (await client.call("wait", last.id, timeout=30)).status == RunStatus.SUCCEEDED
    group = await client.call("get_group", account.id, group_id)
    assert (group.total, group.pending, group.succeeded, group.cancelled) == (4, 0, 2, 2)
    assert group.completed_at is not None
    listed = await client.collect("list_runs", account.id, group=group_id, limit=3)
    assert sorted(r.id for r in listed) == sorted(r.id for r in (first, second, last, joined))
    assert [g.id for g in await client.collect("list_groups", account.id, page_size=1)] == [group_id]
    with pytest.raises(ApiError) as missing:
        await client.call("get_group", account.id, uuid.uuid4())
    assert (missing.value.status, missing.value.code) == (404, "not_found")

    # An event: a run of each subscribed job; its key again answers the same runs, another body is 422.
    runs = await client.call("publish_event", account.id, "order.placed", {"order": 7}, idempotency_key="o-7")
    assert [(r.job, r.payload, r.idempotency_key) for r in runs] == [("report", {"order": 7}, "o-7:report")]
    again = await client.call(
        "publish_event", account.id, "order.placed", {"order": 7}, idempotency_key="o-7"
    )
    assert [r.id for r in again] == [r.id for r in runs]
    with pytest.raises(ApiError) as reused:
        await client.call("publish_event", account.id, "order.placed", {"order": 8}, idempotency_key="o-7")
    assert (reused.value.status, reused.value.field) == (422, "idempotency_key")
    [defaulted] = await client.call("publish_event", account.id, "order.placed")
    assert defaulted.payload == {"d": 1} and defaulted.idempotency_key.endswith(":report")
    assert await client.call("publish_event", account.id, "nobody.listens") == []
