"""schedctl as a script runs it: a subprocess against the live API, reading SCHEDULER_API_URL and
SCHEDULER_API_KEY (flags override), printing tables or the API's own objects, and exiting 0 (done),
1 (the API's problem, its detail on stderr) or 2 (usage): runs (with their dependencies and group),
jobs, keys, groups and events."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from app.dev import free_port
from tests.clients.conftest import Account, Live

CLIENT_SRC = Path(__file__).resolve().parents[2] / "clients" / "python" / "src"
LATER = (datetime.now(UTC) + timedelta(hours=1)).isoformat()


@dataclass
class Done:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


async def schedctl(*args: str, url: str | None, key: str | None, **env: str) -> Done:
    """`schedctl ARGS` with SCHEDULER_API_URL/KEY set to url/key (None: unset) and `env` beside."""
    environ = {k: v for k, v in os.environ.items() if k not in ("SCHEDULER_API_URL", "SCHEDULER_API_KEY")}
    environ["PYTHONPATH"] = os.pathsep.join([str(CLIENT_SRC), os.environ.get("PYTHONPATH", "")])
    environ.update({"SCHEDULER_API_URL": url} if url else {})
    environ.update({"SCHEDULER_API_KEY": key} if key else {})
    environ.update(env)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "scheduler_client.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environ,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return Done(process.returncode, out.decode(), err.decode())


async def test_runs_commands(live: Live, account: Account) -> None:
    async def run(*args: str) -> Done:
        done = await schedctl(*args, url=live.url, key=account.api_key)
        assert done.code == 0, done
        return done

    await account.http.put(f"/tenants/{account.id}/jobs/send-report", json={"target": {"type": "noop"}})
    t = account.id
    submitted = (
        await run(
            "runs",
            "submit",
            "--tenant",
            t,
            "--job",
            "send-report",
            "--payload",
            '{"user": 42}',
            "--scheduled-at",
            LATER,
            "--output",
            "json",
        )
    ).json()
    assert (submitted["status"], submitted["payload"]) == ("pending", {"user": 42})
    run_id = submitted["id"]
    # --output json is the API's own object, as GET /runs/{id} answers it.
    api = (await account.http.get(f"/runs/{run_id}")).json()
    assert (await run("runs", "get", run_id, "-o", "json")).json() == api
    table = (await run("runs", "get", run_id)).out
    assert table.splitlines()[0].split() == ["id", run_id] and "status" in table

    for _ in range(2):
        await run("runs", "submit", "--tenant", t, "--job", "send-report", "--scheduled-at", LATER)
    listed = (await run("runs", "list", "--tenant", t, "--limit", "2", "-o", "json")).json()
    assert len(listed) == 2 and all(r["tenant_id"] == t for r in listed)
    rows = (await run("runs", "list", "--tenant", t, "--job", "send-report")).out.splitlines()
    assert rows[0].split() == ["id", "job", "status", "attempt", "scheduled_at", "finished_at"]
    assert len(rows) == 4 and any(row.startswith(run_id) for row in rows)

    assert (await run("runs", "cancel", run_id, "-o", "json")).json()["status"] == "cancelled"
    assert (await run("runs", "wait", run_id, "--timeout", "5", "-o", "json")).json()["status"] == "cancelled"
    await account.http.post(f"/tenants/{t}/jobs/send-report/pause")
    retried = (await run("runs", "retry", run_id, "--max-attempts", "4", "-o", "json")).json()
    assert (retried["status"], retried["max_attempts"]) == ("pending", 4)
    waited = await schedctl("runs", "wait", run_id, "--timeout", "0.5", url=live.url, key=account.api_key)
    assert waited.code == 1 and "still pending" in waited.err, waited


async def test_jobs_and_keys_commands(live: Live, account: Account) -> None:
    async def run(*args: str) -> Done:
        # The tenant from SCHEDULER_TENANT this time.
        done = await schedctl(*args, url=live.url, key=account.api_key, SCHEDULER_TENANT=account.id)
        assert done.code == 0, done
        return done

    put = (
        await run(
            "jobs",
            "put",
            "nightly",
            "--target",
            '{"type": "noop"}',
            "--schedule",
            "0 3 * * *",
            "--payload",
            '{"d": 1}',
            "--fields",
            '{"max_attempts": 5}',
            "-o",
            "json",
        )
    ).json()
    assert (put["name"], put["schedule"], put["payload"], put["max_attempts"]) == (
        "nightly",
        "0 3 * * *",
        {"d": 1},
        5,
    )
    assert (await run("jobs", "get", "nightly", "-o", "json")).json() == (
        await account.http.get(f"/tenants/{account.id}/jobs/nightly")
    ).json()
    assert (await run("jobs", "pause", "nightly", "-o", "json")).json()["paused"] is True
    rows = (await run("jobs", "list")).out.splitlines()
    assert rows[0].split() == ["name", "schedule", "paused", "next_fire_at"]
    assert rows[1].split()[0] == "nightly" and "true" in rows[1].split()
    assert (await run("jobs", "resume", "nightly", "-o", "json")).json()["paused"] is False
    triggered = (await run("jobs", "trigger", "nightly", "-o", "json")).json()
    assert (triggered["job"], triggered["payload"]) == ("nightly", {"d": 1})

    created = (await run("keys", "create", "-o", "json")).json()
    assert created["api_key"] and created["key_id"]
    assert len(created["scopes"]) == 5  # every scope, by default
    scoped = (
        await run("keys", "create", "--scope", "runs:read", "--scope", "jobs:read", "-o", "json")
    ).json()
    assert scoped["scopes"] == ["runs:read", "jobs:read"]
    assert len((await run("keys", "list", "-o", "json")).json()) == 3
    revoked = await run("keys", "revoke", created["key_id"])
    assert revoked.out == ""
    [key] = [k for k in (await run("keys", "list", "-o", "json")).json() if k["key_id"] == created["key_id"]]
    assert key["revoked_at"] is not None


async def test_exit_codes(live: Live, account: Account) -> None:
    url, key, t = live.url, account.api_key, account.id
    # 1: the API's problem, its detail on stderr.
    missing = await schedctl("runs", "get", str(uuid.uuid4()), url=url, key=key)
    assert missing.code == 1 and missing.out == "" and "404 not_found" in missing.err, missing
    invalid = await schedctl("runs", "submit", "--tenant", t, "--job", "nope", url=url, key=key)
    assert invalid.code == 1 and "nope" in invalid.err and "field job" in invalid.err, invalid
    unauthorized = await schedctl("keys", "list", "--tenant", t, url=url, key="sch_wrong")
    assert unauthorized.code == 1 and "401" in unauthorized.err, unauthorized
    # ... or no API at that address (after the client's retries).
    unreachable = await schedctl(
        "keys", "list", "--tenant", t, url=f"http://127.0.0.1:{free_port()}", key=key
    )
    assert unreachable.code == 1 and "cannot reach" in unreachable.err, unreachable

    # 2: usage.
    usage = [
        ("runs", "submit", "--tenant", t, "--job", "x", "--payload", "{not json"),
        ("runs", "submit", "--tenant", t),  # no --job
        ("runs", "get", "not-a-uuid"),
        ("runs", "list"),  # no tenant
        ("jobs", "put", "x", "--tenant", t, "--target", "[1]"),  # not an object
        ("runs", "explode"),
    ]
    for args in usage:
        done = await schedctl(*args, url=url, key=key)
        assert done.code == 2 and done.err.startswith("usage:"), (args, done)
    no_address = await schedctl("keys", "list", "--tenant", t, url=None, key=key)
    assert no_address.code == 2 and "SCHEDULER_API_URL" not in no_address.out, no_address

    # Flags override the environment.
    flagged = await schedctl(
        "keys",
        "list",
        "--tenant",
        t,
        "--url",
        url,
        "--api-key",
        key,
        url="http://127.0.0.1:1",
        key="sch_wrong",
    )
    assert flagged.code == 0, flagged


async def test_dependencies_groups_and_events_commands(live: Live, account: Account) -> None:
    async def run(*args: str) -> Done:
        done = await schedctl(*args, url=live.url, key=account.api_key, SCHEDULER_TENANT=account.id)
        assert done.code == 0, done
        return done

    jobs = f"/tenants/{account.id}/jobs"
    await account.http.put(f"{jobs}/step", json={"target": {"type": "noop"}})
    await account.http.put(f"{jobs}/report", json={"target": {"type": "noop"}, "on_events": ["order.placed"]})
    batch = await account.http.post(
        f"/tenants/{account.id}/runs/batch",
        json={"runs": [{"job": "step", "scheduled_at": LATER}], "group": {"name": "nightly"}},
    )
    assert batch.status_code == 201, batch.text
    [parent], group_id = batch.json()["runs"], batch.json()["group_id"]

    submit = ["runs", "submit", "--job", "step", "--depends-on", parent["id"], "--on-parent-failure", "run"]
    child = (await run(*submit, "--pass-results", "--group", group_id, "-o", "json")).json()
    assert [child["depends_on"], child["held"], child["group_id"]] == [
        [parent["id"]],
        "dependencies",
        group_id,
    ]
    listed = (await run("runs", "list", "--group", group_id, "-o", "json")).json()
    assert sorted(r["id"] for r in listed) == sorted([parent["id"], child["id"]])

    shown = (await run("groups", "get", group_id, "-o", "json")).json()
    assert shown == (await account.http.get(f"/tenants/{account.id}/groups/{group_id}")).json()
    assert (shown["name"], shown["total"], shown["pending"]) == ("nightly", 2, 2)
    rows = (await run("groups", "list")).out.splitlines()
    assert rows[0].split() == ["id", "name", "total", "pending", "completed_at", "fired_at"]
    assert rows[1].split()[:4] == [group_id, "nightly", "2", "2"] and len(rows) == 2

    publish = ["events", "publish", "order.placed", "--payload", '{"order": 7}', "--idempotency-key", "o-7"]
    [row] = (await run(*publish)).out.splitlines()[1:]  # a table of the runs made
    assert row.split()[1:3] == ["report", "pending"]
    again = (await run(*publish, "-o", "json")).json()
    assert [(r["id"], r["payload"]) for r in again] == [(row.split()[0], {"order": 7})]
    assert (await run("events", "publish", "nobody.listens", "-o", "json")).json() == []

    # The command line refuses what is not a run's or a group's id, or an unknown policy.
    for args in (
        ("runs", "submit", "--job", "step", "--depends-on", "extract"),
        ("runs", "submit", "--job", "step", "--on-parent-failure", "skip"),
        ("groups", "get", "nightly"),
        ("events", "publish", "order.placed", "--payload", "{not json"),
    ):
        done = await schedctl(*args, url=live.url, key=account.api_key, SCHEDULER_TENANT=account.id)
        assert done.code == 2 and done.err.startswith("usage:"), (args, done)
