"""The audit log over the real API and Postgres (engine off): every change through the API is one
event with its actor, action and target, written in the change's transaction; a run a client
submits is none; the listing is newest first, keyset-paged, filtered by action, and the tenant's
own; days are made and dropped by partition maintenance."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from app.config import Settings
from app.engine.partitions import PartitionMaintenance
from tests.support import ADMIN_TOKEN, assert_error, bearer, create_tenant, put_job, submit_run

ADMIN = bearer(ADMIN_TOKEN)
EVERY_5 = "*/5 * * * *"


async def events(api: httpx.AsyncClient, tenant: str, auth: dict[str, str], **params: Any) -> list[dict]:
    r = await api.get(f"/tenants/{tenant}/audit", params={"limit": 500, **params}, headers=auth)
    assert r.status_code == 200, r.text
    return list(r.json()["events"])


def summary(listed: list[dict]) -> list[tuple[str, str, str, str]]:
    """(action, actor type, actor id, target), oldest first."""
    return [(e["action"], e["actor"]["type"], e["actor"]["id"], e["target"]) for e in reversed(listed)]


async def test_every_change_is_one_event_and_a_submitted_run_none(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth, key = tenant["auth"], tenant["key_id"]
    r = await api.post("/tenants/acme/keys", headers=auth)
    second = r.json()["key_id"]
    assert (await api.delete(f"/tenants/acme/keys/{second}", headers=auth)).status_code == 204
    r = await api.post("/tenants/acme/signing-secrets", json={"overlap_seconds": 60}, headers=auth)
    assert r.status_code == 201
    await put_job(api, "acme", "report", auth, schedule=EVERY_5)
    assert (await api.post("/tenants/acme/jobs/report/pause", headers=auth)).status_code == 200
    assert (await api.post("/tenants/acme/jobs/report/resume", headers=auth)).status_code == 200
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    window = {
        "from": (now - timedelta(minutes=30)).isoformat(),
        "to": (now - timedelta(minutes=15)).isoformat(),
    }
    r = await api.post("/tenants/acme/jobs/report/backfill", json=window, headers=auth)
    assert r.status_code == 200 and len(r.json()["runs"]) == 3, r.text
    assert (await api.delete("/tenants/acme/jobs/report", headers=auth)).status_code == 204
    run = await submit_run(api, "acme", auth, job="hello")  # a client's submission: no event
    later = await submit_run(
        api, "acme", auth, job="hello", scheduled_at=(now + timedelta(hours=1)).isoformat()
    )
    assert (await api.post(f"/runs/{run['id']}/cancel", headers=auth)).status_code == 200
    assert (await api.post(f"/runs/{run['id']}/retry", headers=ADMIN)).status_code == 200
    due = {"due_at": (now + timedelta(hours=2)).isoformat()}
    assert (await api.post(f"/runs/{later['id']}/reschedule", json=due, headers=auth)).status_code == 200
    bulk = {"action": "cancel", "filter": {"job": "hello", "status": ["pending"]}, "limit": 10}
    r = await api.post("/tenants/acme/runs/actions", json=bulk, headers=auth)
    assert r.json()["changed"] == 2, r.text
    assert (await api.post("/tenants/acme/pause", headers=ADMIN)).status_code == 200
    assert (await api.post("/tenants/acme/resume", headers=ADMIN)).status_code == 200
    assert (await api.patch("/tenants/acme", json={"max_in_flight": 5}, headers=ADMIN)).status_code == 200

    listed = await events(api, "acme", auth)
    assert summary(listed) == [
        ("tenant.created", "admin", "admin", "tenant:acme"),
        ("job.put", "key", key, "job:hello"),
        ("key.created", "key", key, f"key:{second}"),
        ("key.revoked", "key", key, f"key:{second}"),
        ("signing_secret.rotated", "key", key, "tenant:acme"),
        ("job.put", "key", key, "job:report"),
        ("job.paused", "key", key, "job:report"),
        ("job.resumed", "key", key, "job:report"),
        ("job.backfilled", "key", key, "job:report"),
        ("job.deleted", "key", key, "job:report"),
        ("run.cancelled", "key", key, f"run:{run['id']}"),
        ("run.retried", "admin", "admin", f"run:{run['id']}"),
        ("run.rescheduled", "key", key, f"run:{later['id']}"),
        ("runs.bulk_cancelled", "key", key, "runs"),
        ("tenant.paused", "admin", "admin", "tenant:acme"),
        ("tenant.resumed", "admin", "admin", "tenant:acme"),
        ("tenant.patched", "admin", "admin", "tenant:acme"),
    ]
    by_action = {e["action"]: e for e in listed}
    assert by_action["job.backfilled"]["detail"] == {**window, "runs": 3, "existing": 0}
    assert by_action["runs.bulk_cancelled"]["detail"] == {
        "filter": {"job": "hello", "statuses": ["pending"]},
        "limit": 10,
        "resumed": False,
        "matched": 2,
        "changed": 2,
    }
    assert by_action["tenant.patched"]["detail"] == {"max_in_flight": 5}
    assert by_action["job.put"]["detail"] == {"created": True}
    # Never a secret: not the keys, not the signing secret.
    stored = str(await pool.fetch("SELECT * FROM audit_events"))
    assert tenant["api_key"] not in stored and tenant["signing_secret"] not in stored
    assert all(re.fullmatch(r"[0-9a-f]{32}", e["request_id"]) for e in listed)
    assert len({e["request_id"] for e in listed}) == len(listed)


async def test_the_request_id_is_the_callers_or_made_and_answered(
    api: httpx.AsyncClient, tenant: dict
) -> None:
    auth, job = tenant["auth"], {"target": {"type": "noop"}}
    kept = ["deploy-42.a", "k" * 128]
    # One the API would not keep is replaced by one of its own, never answered or stored as given:
    # too long, a space or a tab, not ASCII (UTF-8, or bytes of no encoding at all).
    malformed: list[str | bytes] = ["k" * 129, "a b", "deploy\t42", "caf\u00e9".encode(), b"\xff\xfe-1"]
    answered = []
    for given in [*kept, *malformed]:
        r = await api.put("/tenants/acme/jobs/hello", json=job, headers={**auth, "X-Request-ID": given})
        assert r.status_code == 200, r.text
        answered.append(r.headers["x-request-id"])
    made = answered[len(kept) :]
    assert answered[: len(kept)] == kept and len(set(made)) == len(made)
    assert all(re.fullmatch(r"[0-9a-f]{32}", m) for m in made), made
    latest = await events(api, "acme", auth, limit=len(answered))
    assert [e["request_id"] for e in latest] == answered[::-1]
    # Any other control character never reaches the API: the HTTP parser refuses the request.
    refused = await api.put(
        "/tenants/acme/jobs/hello", json=job, headers={**auth, "X-Request-ID": "a\x1b[2J"}
    )
    assert refused.status_code == 400 and "a\x1b" not in refused.headers.get("x-request-id", "")
    assert [e["request_id"] for e in await events(api, "acme", auth, limit=1)] == [made[-1]]
    assert "x-request-id" in (await api.get("/healthz")).headers


async def test_a_change_refused_or_rolled_back_leaves_no_event(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    before = await events(api, "acme", auth)
    # Refused changes: a tenant that exists, a run that cannot be retried, a job that is not there.
    assert_error(await api.post("/tenants", json={"id": "acme"}, headers=ADMIN), 409, "conflict", "id")
    run = await submit_run(api, "acme", auth, job="hello")
    assert (await api.post(f"/runs/{run['id']}/retry", headers=auth)).status_code == 409
    assert (await api.delete("/tenants/acme/jobs/nothing", headers=auth)).status_code == 404
    assert await events(api, "acme", auth) == before

    # The event and the change commit together: an event that cannot be written takes its change
    # with it (here a constraint refuses job.paused events).
    await pool.execute("ALTER TABLE audit_events ADD CONSTRAINT no_pauses CHECK (action <> 'job.paused')")
    failed = await api.post("/tenants/acme/jobs/hello/pause", headers=auth)
    assert failed.status_code == 500
    assert (await api.get("/tenants/acme/jobs/hello", headers=auth)).json()["paused"] is False
    await pool.execute("ALTER TABLE audit_events DROP CONSTRAINT no_pauses")
    assert await events(api, "acme", auth) == before


async def test_listing_newest_first_paged_filtered_and_the_tenants_own(
    api: httpx.AsyncClient, tenant: dict
) -> None:
    auth = tenant["auth"]
    for n in range(5):
        await put_job(api, "acme", f"job-{n}", auth)
    for n in range(2):
        assert (await api.post(f"/tenants/acme/jobs/job-{n}/pause", headers=auth)).status_code == 200
    everything = await events(api, "acme", auth)
    assert len(everything) == 1 + 1 + 5 + 2  # created, hello, five jobs, two pauses
    moments = [(e["at"], e["id"]) for e in everything]
    assert moments == sorted(moments, reverse=True)

    paged, cursor = [], None
    while True:
        r = await api.get(
            "/tenants/acme/audit", params={"limit": 2, **({"cursor": cursor} if cursor else {})}, headers=auth
        )
        body = r.json()
        paged += body["events"]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert paged == everything

    paused = await events(api, "acme", auth, action="job.paused")
    assert [e["target"] for e in paused] == ["job:job-1", "job:job-0"]
    assert await events(api, "acme", ADMIN, action="job.paused") == paused  # the admin token reads it too
    assert_error(
        await api.get("/tenants/acme/audit", params={"action": "job.exploded"}, headers=auth),
        422,
        "invalid_input",
    )
    assert_error(
        await api.get("/tenants/acme/audit", params={"cursor": "bm90IG91cnM="}, headers=auth),
        422,
        "invalid_input",
        "cursor",
    )

    other = await create_tenant(api, "beta")
    beta = bearer(other["api_key"])
    assert_error(await api.get("/tenants/acme/audit", headers=beta), 404, "not_found")
    assert [e["action"] for e in await events(api, "beta", beta)] == ["tenant.created"]
    assert_error(await api.get("/tenants/nobody/audit", headers=ADMIN), 404, "not_found", "tenant_id")
    assert_error(await api.get("/tenants/acme/audit"), 401, "unauthorized")


async def test_bulk_action_over_several_chunks_is_one_event(api: httpx.AsyncClient, tenant: dict) -> None:
    auth = tenant["auth"]
    r = await api.post("/tenants/acme/runs/batch", json={"runs": [{"job": "hello"}] * 700}, headers=auth)
    assert r.status_code == 201
    bulk = {"action": "cancel", "filter": {"job": "hello"}, "limit": 10_000}
    r = await api.post("/tenants/acme/runs/actions", json=bulk, headers=auth)
    assert (r.json()["matched"], r.json()["changed"]) == (700, 700)
    [event] = await events(api, "acme", auth, action="runs.bulk_cancelled")
    assert (event["detail"]["matched"], event["detail"]["changed"]) == (700, 700)
    # Nothing left to change is still the request, recorded with its counts.
    r = await api.post("/tenants/acme/runs/actions", json=bulk, headers=auth)
    assert r.json()["changed"] == 0
    latest = (await events(api, "acme", auth, action="runs.bulk_cancelled"))[0]
    assert (latest["detail"]["matched"], latest["detail"]["changed"]) == (700, 0)


async def test_days_are_made_ahead_and_dropped_past_retention(settings: Settings, pool: asyncpg.Pool) -> None:
    today = (await pool.fetchval("SELECT now()")).astimezone(UTC).date()
    old, kept, stranded = today - timedelta(days=91), today - timedelta(days=89), today - timedelta(days=5)
    for day in (old, kept):
        assert await pool.fetchval("SELECT scheduler_create_audit_day_partition($1)", day) == "created"
    for day in (old, kept, stranded):  # the last lands in DEFAULT: its day has no partition
        await pool.execute(
            "INSERT INTO audit_events VALUES ('acme', $1, gen_random_uuid(), 'admin', 'admin', NULL,"
            " 'tenant.paused', 'tenant:acme', 'r', '{}')",
            datetime.combine(day, datetime.min.time(), UTC) + timedelta(hours=12),
        )
    maintenance = PartitionMaintenance(settings.model_copy(update={"audit_retention_days": 90}), pool)
    report = await maintenance.step()
    assert f"{old}: dropped" in report["audit"] and f"{stranded}: created, moved 1" in report["audit"]
    parts = {
        r["relname"]
        for r in await pool.fetch(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'audit_events'::regclass"
        )
    }
    ahead = {
        f"audit_events_p{today + timedelta(days=n):%Y%m%d}" for n in range(-1, settings.premake_days + 1)
    }
    assert ahead <= parts
    assert f"audit_events_p{kept:%Y%m%d}" in parts and f"audit_events_p{old:%Y%m%d}" not in parts
    assert await pool.fetchval("SELECT count(*) FROM audit_events_default") == 0
    assert await pool.fetchval("SELECT count(*) FROM audit_events") == 2
    assert (await maintenance.step())["audit"] == []  # idempotent


DOCS = Path(__file__).resolve().parents[2] / "docs" / "audit.md"


@pytest.mark.skipif(shutil.which("curl") is None, reason="the example uses curl")
async def test_the_docs_example_runs_verbatim(api: httpx.AsyncClient, tenant: dict) -> None:
    text = DOCS.read_text()
    example = text[text.index("```sh\n") + len("```sh\n") :]
    # Verbatim, but any HTTP error or failed command stops the script with a non-zero exit.
    script = 'set -eo pipefail\ncurl() { command curl -fS "$@"; }\n' + example[: example.index("```")]
    env = {
        **os.environ,
        "API": str(api.base_url).rstrip("/"),
        "KEY": f"Authorization: Bearer {tenant['api_key']}",
    }
    done = await asyncio.to_thread(
        subprocess.run,
        ["bash", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    listed = json.loads(done.stdout[done.stdout.rindex('{"events"') :])  # the last answer: the listing
    [event] = listed["events"]
    assert event["actor"] == {"type": "key", "id": tenant["key_id"], "key_id": None}
    assert (event["action"], event["target"], event["request_id"]) == (
        "job.paused",
        "job:hello",
        "deploy-1234",
    )
    assert event["detail"] == {"released": 0} and listed["next_cursor"]  # a full page: there may be more
