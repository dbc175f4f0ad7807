"""Retries against the live API: a 503 or 429 is waited out (its Retry-After) and a lost answer
sent again, with the same Idempotency-Key every time, so a submission (or an event) makes its runs
once; retries are bounded, and a request that may have been processed without a key is not sent
twice. A front door (tests/clients/front.py) between client and API answers 503s and holds answers
back; the API behind it is the real one."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from scheduler_client import ApiError, RetryPolicy

from app.dev import free_port
from stack.eventually import eventually
from tests.clients.conftest import Account, Calls, Live, live_stack, new_account
from tests.clients.front import Front, Seen, running_front
from tests.support import Services

LATER = datetime.now(UTC) + timedelta(hours=1)


async def _runs(account: Account) -> list[dict]:
    answer = await account.http.get(f"/tenants/{account.id}/runs")
    assert answer.status_code == 200, answer.text
    return list(answer.json()["runs"])


@pytest_asyncio.fixture(loop_scope="session")
async def later(account: Account) -> str:
    """A noop job of the account's; its runs here are scheduled an hour ahead, so they stay pending."""
    answer = await account.http.put(f"/tenants/{account.id}/jobs/later", json={"target": {"type": "noop"}})
    assert answer.status_code == 201, answer.text
    return "later"


def _impatient(make_client: Callable[..., Calls], front: Front, account: Account) -> Calls:
    """A client through the front door that gives up on an answer after 2 s and retries at once."""
    return make_client(front.url, account.api_key, timeout=2.0, retries=RetryPolicy(backoff=0.05))


def _answered(posts: list[Seen], status: int) -> bool:
    """The first answer was lost, the last was `status`, any between were 409s (the key in flight)."""
    statuses = [p.status for p in posts]
    return len(statuses) >= 2 and statuses[0] == 0 and statuses[-1] == status and set(statuses[1:-1]) <= {409}


async def test_a_503_is_waited_out_and_the_submission_keeps_its_key(
    live: Live, account: Account, later: str, make_client: Callable[..., Calls]
) -> None:
    async with running_front(live.url) as front:
        front.script = ["503:1", "503:1"]
        client = make_client(front.url, account.api_key)
        run = await client.call("submit_run", account.id, later, {"n": 1}, scheduled_at=LATER)

    posts = front.posts()
    assert [p.status for p in posts] == [503, 503, 201]
    assert {p.headers["idempotency-key"] for p in posts} == {run.idempotency_key}
    # Retry-After: 1 was honoured.
    assert all(b.at - a.at >= 0.9 for a, b in itertools.pairwise(posts)), posts
    assert [r["id"] for r in await _runs(account)] == [str(run.id)]


async def test_a_lost_answer_is_asked_again_and_makes_one_run(
    live: Live, account: Account, later: str, make_client: Callable[..., Calls]
) -> None:
    async with running_front(live.url) as front:
        # The API makes the run, but its answer comes after the client's timeout.
        front.script = ["hold:4"]
        client = _impatient(make_client, front, account)
        run = await client.call(
            "submit_run", account.id, later, scheduled_at=LATER, idempotency_key="order-7"
        )

    posts = front.posts()
    # The last is the API's answer to a repeated key: the run it made (200, not 201); between them,
    # on a slow machine, 409s while the API still processed the first.
    assert _answered(posts, 200), posts
    assert {p.headers["idempotency-key"] for p in posts} == {"order-7"}
    assert [r["id"] for r in await _runs(account)] == [str(run.id)]


async def test_an_events_lost_answer_is_asked_again_and_makes_its_runs_once(
    live: Live, account: Account, later: str, make_client: Callable[..., Calls]
) -> None:
    subscribed = {"target": {"type": "noop"}, "on_events": ["order.placed"]}
    assert (await account.http.put(f"/tenants/{account.id}/jobs/{later}", json=subscribed)).status_code == 200
    async with running_front(live.url) as front:
        front.script = ["hold:4"]
        client = _impatient(make_client, front, account)
        [run] = await client.call("publish_event", account.id, "order.placed", {"order": 7})

    posts = front.posts()
    # Every attempt carries the key the client made for the call; the last is answered as a replay.
    assert _answered(posts, 200), posts
    [key] = {p.headers["idempotency-key"] for p in posts}
    assert run.idempotency_key == f"{key}:{later}"
    assert [r["id"] for r in await _runs(account)] == [str(run.id)]


async def test_a_key_still_in_flight_is_waited_for_and_a_batch_is_keyed(
    live: Live, account: Account, later: str, make_client: Callable[..., Calls]
) -> None:
    async with running_front(live.url) as front:
        client = _impatient(make_client, front, account)
        front.script = ["409"]
        run = await client.call("submit_run", account.id, later, scheduled_at=LATER)
        assert [p.status for p in front.posts()] == [409, 201]

        # A batch: every run carries a key, so a lost answer is asked again and makes them once.
        front.script, front.seen = ["hold:4"], []
        batch = await client.call("submit_batch", account.id, [{"job": later, "scheduled_at": LATER}] * 3)
        assert _answered(front.posts(), 201), front.posts()

        # A 409 of a request without a key is the state of things: not retried.
        front.script, front.seen = ["409"], []
        with pytest.raises(ApiError) as conflict:
            await client.call("cancel_run", run.id)
        assert (conflict.value.status, len(front.seen)) == (409, 1)

    assert sorted(r["id"] for r in await _runs(account)) == sorted(str(r.id) for r in [run, *batch])


async def test_retries_are_bounded(live: Live, account: Account, make_client: Callable[..., Calls]) -> None:
    async with running_front(live.url) as front:
        front.script = ["503:0"] * 10
        client = make_client(front.url, account.api_key, retries=RetryPolicy(attempts=3))
        with pytest.raises(ApiError) as unavailable:
            await client.call("submit_run", account.id, "later")
        assert (unavailable.value.status, unavailable.value.code) == (503, "unavailable")
        assert len(front.posts()) == 3

        # Asked to wait longer than it would, the client gives up at once.
        front.script, front.seen = ["503:3600"], []
        with pytest.raises(ApiError):
            await client.call("get_run", "01a23fa8-12a4-7e2a-9946-2867628af6f8")
        assert len(front.seen) == 1


async def test_a_request_that_may_have_been_processed_is_not_repeated_without_a_key(
    live: Live, account: Account, later: str, make_client: Callable[..., Calls]
) -> None:
    async with running_front(live.url) as front:
        client = _impatient(make_client, front, account)
        run = await client.call("submit_run", account.id, later, scheduled_at=LATER)
        front.script = ["hold:4"]
        with pytest.raises(httpx.ReadTimeout):
            await client.call("cancel_run", run.id)
        assert [p.path for p in front.posts()] == [f"/tenants/{account.id}/runs", f"/runs/{run.id}/cancel"]


async def test_a_refused_connection_is_retried(
    live: Live, account: Account, later: str, make_client: Callable[..., Calls]
) -> None:
    port = free_port()
    client = make_client(
        f"http://127.0.0.1:{port}",
        account.api_key,
        retries=RetryPolicy(attempts=10, backoff=0.2, max_backoff=0.5),
    )
    submission = asyncio.create_task(client.call("submit_run", account.id, later, scheduled_at=LATER))
    await asyncio.sleep(1.0)
    assert not submission.done()  # refused, and trying again
    async with running_front(live.url, port=port) as front:
        run = await submission
    assert [p.status for p in front.posts()] == [201]
    assert [r["id"] for r in await _runs(account)] == [str(run.id)]


@pytest.mark.parametrize("kind", ["async"])  # the sync transport's waits are the 503 tests'
async def test_a_tenant_over_its_quota_is_retried_after_retry_after(
    services: Services, template: str, tmp_path: Path, make_client: Callable[..., Calls]
) -> None:
    async with (
        live_stack(services, template, tmp_path, tenant_max_pending=1) as live,
        new_account(live) as account,
        running_front(live.url) as front,
    ):
        await account.http.put(f"/tenants/{account.id}/jobs/later", json={"target": {"type": "noop"}})
        client = make_client(front.url, account.api_key)
        first = await client.call("submit_run", account.id, "later", scheduled_at=LATER)
        second = asyncio.create_task(client.call("submit_run", account.id, "later", scheduled_at=LATER))
        await eventually(lambda: [p for p in front.posts() if p.status == 429], what="a 429")
        # Room in the backlog: the waiting submission goes through on its next attempt.
        assert (await account.http.post(f"/runs/{first.id}/cancel")).status_code == 200
        run = await second

        posts = front.posts()[1:]
        assert [p.status for p in posts][-1] == 201 and {p.status for p in posts[:-1]} == {429}, posts
        assert {p.headers["idempotency-key"] for p in posts} == {run.idempotency_key}
        assert posts[1].at - posts[0].at >= 4.9  # the API's Retry-After: 5
        assert sorted(r["id"] for r in await _runs(account)) == sorted([str(first.id), str(run.id)])
