"""Run dependencies through real processes: API -> engine -> NATS -> worker -> a local webhook
receiver. A dependent is released by its parent's success and receives the parent's result beside
its payload, in the default body and in the envelope."""

from __future__ import annotations

import orjson

from tests.e2e.conftest import wait_for


async def test_a_dependent_runs_after_its_parent_with_its_result(stack: dict) -> None:
    auth, api, receiver = stack["auth"], stack["api"], stack["receiver"]
    for name, target in (
        ("hook", {"type": "http", "url": receiver.url}),
        ("env", {"type": "http", "url": receiver.url, "body": "envelope"}),
    ):
        r = await api.put(
            f"/tenants/acme/jobs/{name}", json={"target": target, "max_attempts": 1}, headers=auth
        )
        assert r.status_code in (200, 201), r.text
    await stack["spawn"]("worker").wait_ready(timeout=90)
    answer = {"answer": {"body": '{"rows": 3}', "content_type": "application/json"}}
    r = await api.post(
        "/tenants/acme/runs/batch",
        json={
            "runs": [
                {"job": "hook", "ref": "extract", "payload": answer},
                {"job": "hook", "depends_on": ["extract"], "pass_results": True, "payload": {"step": 2}},
                {"job": "env", "depends_on": ["extract"], "pass_results": True, "payload": {"step": 3}},
            ]
        },
        headers=auth,
    )
    assert r.status_code == 201, r.text
    parent, plain, enveloped = r.json()["runs"]
    assert [run["held"] for run in (parent, plain, enveloped)] == [None, "dependencies", "dependencies"]
    done = {
        run["id"]: await wait_for(api, run["id"], auth, {"succeeded", "failed"}, timeout=60)
        for run in (parent, plain, enveloped)
    }
    assert {d["status"] for d in done.values()} == {"succeeded"}, done
    for child in (plain, enveloped):
        assert done[child["id"]]["started_at"] > done[parent["id"]]["finished_at"]
    [call] = receiver.for_run(plain["id"])
    assert orjson.loads(call.body) == {"payload": {"step": 2}, "parents": {"extract": {"rows": 3}}}
    [call] = receiver.for_run(enveloped["id"])
    data = call.envelope["data"]
    assert (data["payload"], data["parents"]) == ({"step": 3}, {"extract": {"rows": 3}})
    r = await api.get(f"/runs/{parent['id']}", headers=auth)
    assert r.json()["dependents"] == 2
