"""Results, attempt history and Retry-After through a real worker subprocess (issue 16, items 1, 2
and 7): API -> engine -> NATS -> worker -> a local webhook receiver answering as scripted."""

from __future__ import annotations

import orjson

from stack.eventually import eventually
from tests.e2e.conftest import wait_for
from tests.support import create_tenant


async def put_job(stack: dict, auth: dict, tenant: str = "acme", name: str = "hook", **fields) -> None:
    body = {"target": {"type": "http", "url": stack["receiver"].url}, **fields}
    r = await stack["api"].put(f"/tenants/{tenant}/jobs/{name}", json=body, headers=auth)
    assert r.status_code in (200, 201), r.text


async def submit(stack: dict, auth: dict, payload: dict, tenant: str = "acme", job: str = "hook") -> str:
    r = await stack["api"].post(
        f"/tenants/{tenant}/runs", json={"job": job, "payload": payload}, headers=auth
    )
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def finished(stack: dict, auth: dict, run_id: str, timeout: float = 30) -> dict:
    return await wait_for(stack["api"], run_id, auth, {"succeeded", "failed"}, timeout=timeout)


def answer(**fields) -> dict:
    return {"answer": fields}


async def test_results_of_webhooks_and_handlers_bounded_and_flagged(stack: dict) -> None:
    auth = stack["auth"]
    await put_job(stack, auth, max_attempts=1)
    r = await stack["api"].put(
        "/tenants/acme/jobs/py", json={"target": {"type": "python", "handler": "echo"}}, headers=auth
    )
    assert r.status_code == 201, r.text
    await stack["spawn"]("worker", SCHEDULER_MAX_RESULT_BYTES="4096").wait_ready()
    runs = {
        "json": await submit(stack, auth, answer(body='{"rows": 3}', content_type="application/json")),
        "text": await submit(stack, auth, answer(body="done: 3 rows", content_type="text/plain")),
        "huge": await submit(stack, auth, {"huge": 1_000_000, "status": 200}),
        "empty": await submit(stack, auth, answer(status=204)),
        "python": await submit(stack, auth, {"return": {"total": [1, 2]}}, job="py"),
        "python_huge": await submit(stack, auth, {"return": "y" * 10_000}, job="py"),
    }
    done = {name: await finished(stack, auth, run_id) for name, run_id in runs.items()}
    assert {d["status"] for d in done.values()} == {"succeeded"}, done
    assert done["json"]["result"] == {"rows": 3} and not done["json"]["result_truncated"]
    assert done["text"]["result"] == "done: 3 rows"
    assert done["empty"]["result"] is None
    assert done["python"]["result"] == {"total": [1, 2]}
    for cut in ("huge", "python_huge"):
        assert done[cut]["result_truncated"] is True
        assert len(orjson.dumps(done[cut]["result"])) <= 4096
    assert done["huge"]["result"].startswith("xxxx")


async def test_a_hostile_endpoint_fails_or_is_cut_alone_beside_a_well_behaved_tenant(stack: dict) -> None:
    """Binary bytes, invalid JSON claiming application/json, a 200 MiB answer and a failing 500 with
    a NUL: each is stored sanitised and bounded (or is a failed attempt with its status and an
    excerpt); the other tenant's runs, in between, succeed with their results intact."""
    hostile = stack["auth"]
    await put_job(stack, hostile, max_attempts=1, timeout_seconds=60)
    created = await create_tenant(stack["api"], "victim")
    good = {"Authorization": f"Bearer {created['api_key']}"}
    await put_job(stack, good, "victim", max_attempts=1)
    await stack["spawn"]("worker").wait_ready()
    bad = {
        "binary": await submit(
            stack,
            hostile,
            answer(body_hex="00ff fe ed a0 80 c3".replace(" ", ""), content_type="application/json"),
        ),
        "not_json": await submit(stack, hostile, answer(body='{"a": 1,,}', content_type="application/json")),
        "stream": await submit(stack, hostile, {"stream_mib": 200, "status": 200}),
        "failed": await submit(
            stack, hostile, answer(status=500, body_hex=(b"no\x00pe " + b"z" * 5000).hex())
        ),
    }
    fine = [
        await submit(
            stack,
            good,
            answer(body=orjson.dumps({"n": i}).decode(), content_type="application/json"),
            tenant="victim",
        )
        for i in range(5)
    ]
    for i, run_id in enumerate(fine):
        ok = await finished(stack, good, run_id)
        assert ok["status"] == "succeeded" and ok["result"] == {"n": i} and not ok["result_truncated"]
    done = {name: await finished(stack, hostile, run_id, timeout=60) for name, run_id in bad.items()}
    assert done["binary"]["status"] == "succeeded"
    assert done["binary"]["result"].startswith("\ufffd") and "\x00" not in done["binary"]["result"]
    assert done["not_json"]["result"] == '{"a": 1,,}'
    assert done["stream"]["result_truncated"] is True
    assert len(orjson.dumps(done["stream"]["result"])) <= 64 * 1024
    failed = done["failed"]
    assert failed["status"] == "failed" and failed["result"] is None
    [entry] = failed["attempts"]
    assert entry["outcome"] == "failed" and entry["http_status"] == 500
    # The bounded excerpt (MAX_ERROR_BODY characters of the answer), sanitised.
    assert entry["error"].startswith("HTTP 500: no\ufffdpe zzz") and len(entry["error"]) <= 320


async def test_retry_after_delays_the_next_attempt_bounded_and_hostile_values_ignored(stack: dict) -> None:
    auth = stack["auth"]
    await put_job(stack, auth, max_attempts=2, backoff_seconds=0.1)
    # The worker's bound is 3 s here, so a target asking for a day waits 3 s, not a day.
    await stack["spawn"]("worker", SCHEDULER_MAX_RETRY_AFTER_SECONDS="3").wait_ready()
    then_ok = {"status": 200, "body": "ok"}
    runs = {
        "seconds": await submit(stack, auth, {"answer": [{"status": 429, "retry_after": "2"}, then_ok]}),
        "huge": await submit(stack, auth, {"answer": [{"status": 503, "retry_after": "86400000"}, then_ok]}),
        "garbage": await submit(stack, auth, {"answer": [{"status": 429, "retry_after": "soon!"}, then_ok]}),
        "negative": await submit(stack, auth, {"answer": [{"status": 503, "retry_after": "-30"}, then_ok]}),
        "not_429": await submit(stack, auth, {"answer": [{"status": 500, "retry_after": "2"}, then_ok]}),
    }
    done = {name: await finished(stack, auth, run_id) for name, run_id in runs.items()}
    gaps = {}
    for name, run in done.items():
        assert run["status"] == "succeeded", run
        first, second = stack["receiver"].for_run(runs[name])
        gaps[name] = second.started - first.started
        assert [e["outcome"] for e in run["attempts"]] == ["failed", "succeeded"]
    print("gaps between attempts:", gaps)
    assert done["seconds"]["attempts"][0]["http_status"] == 429
    assert 2.0 <= gaps["seconds"] < 2.0 + 1.5
    assert 3.0 <= gaps["huge"] < 3.0 + 1.5
    for backoff in ("garbage", "negative", "not_429"):
        assert gaps[backoff] < 1.5, (backoff, gaps)


async def test_a_killed_worker_leaves_its_attempt_lost(stack: dict) -> None:
    """The worker is really killed (SIGKILL) mid-attempt; the API's engine reaps the run once its
    lease lapses (2 s here), and the history shows that attempt as lost."""
    auth = stack["auth"]
    await put_job(stack, auth, max_attempts=1, timeout_seconds=60)
    worker = stack["spawn"]("worker")
    await worker.wait_ready()
    run_id = await submit(stack, auth, {"sleep": 60})
    await wait_for(stack["api"], run_id, auth, {"running"})
    await eventually(lambda: stack["receiver"].for_run(run_id), timeout=10, what="the target was called")
    worker.kill()
    done = await finished(stack, auth, run_id)
    assert done["status"] == "failed"
    [lost] = done["attempts"]
    assert lost["outcome"] == "lost" and lost["epoch"] == 1 and lost["finished_at"] is not None


def nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


async def test_answers_beyond_a_payloads_bounds_leave_the_run_readable_beside_a_good_tenant(
    stack: dict,
) -> None:
    """A target answering JSON 253 and 254 deep (orjson's limit is 254, the run's and the listing's
    wrappers included) or numbers beyond 64 bits or a double: each result is kept as its text,
    flagged, so GET /runs/{id}, every listing page (paged through by next_cursor) and the run's
    callback work. Stored as JSON, GET answered 500 at 254, every page holding the run at 253 and
    254, and the callback failed at every attempt. The other tenant's runs keep their JSON results."""
    api, hostile, receiver = stack["api"], stack["auth"], stack["receiver"]
    await put_job(stack, hostile, max_attempts=1, callback={"url": receiver.url})
    created = await create_tenant(api, "victim")
    good = {"Authorization": f"Bearer {created['api_key']}"}
    await put_job(stack, good, "victim", max_attempts=1, callback={"url": receiver.url})
    await stack["spawn"]("worker").wait_ready()
    beyond = {
        "253": nested(253),
        "254": nested(254),
        "2**64": '{"n": 18446744073709551616}',
        "1e400": '{"n": 1' + "0" * 400 + "}",
    }
    bad = {
        name: await submit(stack, hostile, answer(body=body, content_type="application/json"))
        for name, body in beyond.items()
    }
    # 32 levels deep, the bound, and the largest integer orjson writes.
    within = {"rows": [1, 2], "deep": orjson.loads(nested(31)), "n": 18446744073709551615}
    fine = [
        await submit(
            stack, good, answer(body=orjson.dumps(within).decode(), content_type="application/json"), "victim"
        )
        for _ in range(3)
    ]
    for run_id in fine:
        ok = await finished(stack, good, run_id)
        assert ok["status"] == "succeeded" and ok["result"] == within and not ok["result_truncated"], ok
    for name, run_id in bad.items():
        run = await finished(stack, hostile, run_id)
        assert run["status"] == "succeeded", run
        assert run["result"] == beyond[name] and run["result_truncated"] is True, (name, run["result"])

    # Every listing page holding one of them, one run a page.
    listed, cursor = [], None
    while True:
        r = await api.get(
            "/tenants/acme/runs",
            params={"limit": 1, **({"cursor": cursor} if cursor else {})},
            headers=hostile,
        )
        assert r.status_code == 200, r.text
        listed += [run["id"] for run in r.json()["runs"]]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            break
    assert set(bad.values()) <= set(listed)
    r = await api.get("/tenants/acme/runs", params={"limit": 500}, headers=hostile)
    assert r.status_code == 200 and {run["id"] for run in r.json()["runs"]} >= set(bad.values())

    # Each run's callback is delivered, its body the run with the result as text.
    async def delivered(run_id: str, auth: dict) -> dict:
        return dict((await api.get(f"/runs/{run_id}", headers=auth)).json())

    for run_id, auth in [*((i, hostile) for i in bad.values()), *((i, good) for i in fine)]:
        run = await eventually(
            lambda run_id=run_id, auth=auth: delivered(run_id, auth),
            until=lambda run: run["callback"]["status"] in ("delivered", "failed"),
            timeout=30,
            what=f"the callback of {run_id}",
        )
        assert run["callback"]["status"] == "delivered" and run["callback"]["attempts"] == 1, run["callback"]
        [call] = receiver.callbacks_for(run_id)
        assert orjson.loads(call.body)["data"]["result"] == run["result"]
