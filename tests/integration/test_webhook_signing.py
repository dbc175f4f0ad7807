"""Standard Webhooks, end to end: real deliveries through a worker subprocess to a local receiver are
verified with the spec's own library (`standardwebhooks`). The body is the run's payload, byte for
byte what the API answers for it, signed with the run id; every attempt's answer status is kept in
the run's history. A target asking for the envelope gets it, and what a receiver decides on there
(run, attempt, epoch, URL, payload) is signed, so changing any of it fails verification.
Signing-secret rotation signs under both secrets during the overlap and under the new one alone
after it."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import httpx
import orjson
import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from app.config import Settings
from app.services.signing import signing_key
from app.worker.signing_keys import SigningKeys, UnknownTenant
from tests.e2e.conftest import wait_for
from tests.integration.test_migrations import alembic
from tests.integration.test_security_webhooks import Stack, stack
from tests.receiver import Call
from tests.support import ADMIN_TOKEN, bearer, create_tenant

SECRET_FORM = re.compile(r"whsec_[A-Za-z0-9+/]+={0,2}")


def verifies(secret: str, call: Call, body: bytes | None = None) -> bool:
    try:
        Webhook(secret).verify(call.body if body is None else body, call.headers)
    except WebhookVerificationError:
        return False
    return True


def tampered(call: Call, **data: object) -> bytes:
    envelope = call.envelope
    envelope["data"].update(data)
    return orjson.dumps(envelope)


# Submitted as this text: the body is the payload as the API keeps and answers it (docs/webhooks.md,
# "Byte for byte"), so keys are reordered, a repeated key collapses, numbers take the API's spelling.
PAYLOAD_TEXT = r'{"statuses": [500, 200], "bb": 1, "a": 2, "a": 4, "\u00e9": 1e2, "x": 1.50, "y": 1e-7, "z": "\u2028/\\"}'
SENT = '{"a":4,"x":1.5,"y":1e-7,"z":"\u2028/\\\\","bb":1,"é":100.0,"statuses":[500,200]}'.encode()


async def submit_text(s: Stack, job: str, text: str | None) -> str:
    """A run of `job` submitted as raw JSON text (its payload `text`, or none); its id."""
    payload = "" if text is None else f', "payload": {text}'
    body = f'{{"job": "{job}"{payload}}}'
    r = await s.api.post(
        "/tenants/acme/runs", content=body.encode(), headers={**s.auth, "Content-Type": "application/json"}
    )
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def put_job(s: Stack, name: str, target: dict, **fields: object) -> None:
    r = await s.api.put(f"/tenants/acme/jobs/{name}", json={"target": target, **fields}, headers=s.auth)
    assert r.status_code in (200, 201), r.text


async def test_the_body_is_the_payload_as_the_api_answers_it_signed_with_every_status_recorded(
    settings: Settings, tmp_path: Path
) -> None:
    async with stack(settings, tmp_path) as s:
        assert SECRET_FORM.fullmatch(s.signing_secret)
        assert len(base64.b64decode(s.signing_secret.removeprefix("whsec_"))) >= 24  # what the spec asks
        await put_job(s, "hook", {"type": "http", "url": s.receiver.url}, max_attempts=2, backoff_seconds=0.1)
        run_id = await submit_text(s, "hook", PAYLOAD_TEXT)
        done = await wait_for(s.api, run_id, s.auth, {"succeeded", "failed"})
        assert done["status"] == "succeeded" and done["attempt"] == 2
        first, second = s.receiver.for_run(run_id)

        # The body is the run's payload, byte for byte what GET /runs/{id} answers for it.
        answered = (await s.api.get(f"/runs/{run_id}", headers=s.auth)).content
        assert first.body == second.body == SENT
        assert b'"payload":' + SENT + b',"created_at"' in answered
        assert orjson.loads(SENT) == json.loads(PAYLOAD_TEXT)  # the value submitted, reordered
        for call, attempt in ((first, "1"), (second, "2")):
            assert Webhook(s.signing_secret).verify(call.body, call.headers) == done["payload"]
            assert call.headers["webhook-signature"].startswith("v1,")
            assert call.headers["content-type"] == "application/json"
            assert call.headers["webhook-id"] == call.headers["scheduler-run-id"] == run_id
            assert (call.headers["scheduler-attempt"], call.headers["scheduler-epoch"]) == (attempt, attempt)
            assert call.headers["traceparent"].startswith("00-")

        # Every attempt records its answer's status, the success's too.
        assert [(a["attempt"], a["outcome"], a["http_status"]) for a in done["attempts"]] == [
            (1, "failed", 500),
            (2, "succeeded", 200),
        ]
        succeeded = done["attempts"][1]
        assert succeeded["epoch"] == 2 and succeeded["error"] is None and succeeded["worker"]
        assert datetime.fromisoformat(succeeded["finished_at"]) == datetime.fromisoformat(done["finished_at"])
        assert succeeded["duration_ms"] >= 0

        # The signature covers the payload and the run id: a changed byte or another id fails.
        assert not verifies(s.signing_secret, second, SENT.replace(b"200]", b"201]"))
        assert not verifies(s.signing_secret, second, SENT + b" ")
        other_id = dict(second.headers, **{"webhook-id": "01a22a00-74e0-7756-b59d-820d74f5131b"})
        assert not verifies(s.signing_secret, Call(other_id, second.body))
        # The old scheme is gone, with no dual format.
        assert "scheduler-signature" not in second.headers and "scheduler-timestamp" not in second.headers

        # A run without a payload of its own takes its job's: {} by default, JSON null if the job says so.
        await put_job(s, "bare", {"type": "http", "url": s.receiver.url})
        await put_job(s, "nothing", {"type": "http", "url": s.receiver.url}, payload=None)
        for job, body in (("bare", b"{}"), ("nothing", b"null")):
            run_id = await submit_text(s, job, None)
            done = await wait_for(s.api, run_id, s.auth, {"succeeded", "failed"})
            assert done["status"] == "succeeded" and done["payload"] == orjson.loads(body)
            [call] = s.receiver.for_run(run_id)
            assert call.body == body and call.headers["content-type"] == "application/json"
            assert Webhook(s.signing_secret).verify(call.body, call.headers) == orjson.loads(body)
            assert [a["http_status"] for a in done["attempts"]] == [200]


async def test_the_envelope_on_request_signs_everything_a_receiver_trusts(
    settings: Settings, tmp_path: Path
) -> None:
    async with stack(settings, tmp_path) as s:
        target = {"type": "http", "url": s.receiver.url, "body": "envelope"}
        done = await s.run("hook", target, {"statuses": [500, 200]}, max_attempts=2, backoff_seconds=0.1)
        assert done["status"] == "succeeded" and done["attempt"] == 2
        job = (await s.api.get("/tenants/acme/jobs/hook", headers=s.auth)).json()
        assert job["target"]["body"] == "envelope"
        first, second = s.receiver.calls

        for call in (first, second):
            envelope = Webhook(s.signing_secret).verify(call.body, call.headers)
            assert call.headers["webhook-signature"].startswith("v1,")
            assert envelope["type"] == "run.attempt"
            assert envelope["data"]["run_id"] == call.headers["webhook-id"] == done["id"]
            assert envelope["data"]["url"] == s.receiver.url and envelope["data"]["method"] == "POST"
            assert envelope["data"]["job"] == "hook" and envelope["data"]["tenant_id"] == "acme"
            assert envelope["data"]["payload"] == {"statuses": [500, 200]}
        # A re-send keeps webhook-id (the receiver dedupes on it); attempt and epoch move on, signed.
        assert first.headers["webhook-id"] == second.headers["webhook-id"]
        assert (first.envelope["data"]["attempt"], second.envelope["data"]["attempt"]) == (1, 2)
        assert (first.envelope["data"]["epoch"], second.envelope["data"]["epoch"]) == (1, 2)
        assert [a["http_status"] for a in done["attempts"]] == [500, 200]

        # A captured request changed in anything a receiver decides on no longer verifies.
        assert verifies(s.signing_secret, second, tampered(second))  # the control: re-encoding alone
        assert not verifies(s.signing_secret, second, tampered(second, epoch=3))  # a forged fence
        assert not verifies(s.signing_secret, second, tampered(second, attempt=1))
        assert not verifies(
            s.signing_secret, second, tampered(second, url=s.elsewhere.url)
        )  # replayed elsewhere
        assert not verifies(s.signing_secret, second, tampered(second, payload={"statuses": [200]}))
        assert not verifies(
            s.signing_secret, second, tampered(second, run_id=first.envelope["data"]["run_id"] + "0")
        )


async def rotate(api: httpx.AsyncClient, auth: dict, **body: object) -> httpx.Response:
    return await api.post("/tenants/acme/signing-secrets", json=body or None, headers=auth)


async def test_rotation_signs_under_both_secrets_during_the_overlap_then_the_new_one_alone(
    settings: Settings, tmp_path: Path
) -> None:
    cache = 0.3  # the worker's secret cache: a rotation reaches it within this
    async with stack(settings, tmp_path, SCHEDULER_SIGNING_SECRET_CACHE_SECONDS=str(cache)) as s:
        target = {"type": "http", "url": s.receiver.url}
        await s.run("hook", target)  # the worker has the old secret cached now
        old = s.signing_secret
        r = await rotate(s.api, s.auth, overlap_seconds=8)  # room for a delivery on a busy machine
        assert r.status_code == 201, r.text
        new = r.json()["signing_secret"]
        assert SECRET_FORM.fullmatch(new) and new != old

        await asyncio.sleep(cache + 0.2)
        during = (await s.run("hook", target), s.receiver.calls[-1])[1]
        assert len(during.headers["webhook-signature"].split(" ")) == 2
        assert verifies(old, during) and verifies(new, during)

        expires = datetime.fromisoformat(r.json()["previous_expires_at"])
        await asyncio.sleep(max(0.0, (expires - datetime.now(UTC)).total_seconds()) + 0.2)
        # The overlap is over; the worker's cache entry ended with it.
        after = (await s.run("hook", target), s.receiver.calls[-1])[1]
        assert len(after.headers["webhook-signature"].split(" ")) == 1
        assert verifies(new, after) and not verifies(old, after)


async def test_rotation_route(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = bearer(tenant["api_key"])
    other = bearer((await create_tenant(api, "other"))["api_key"])
    assert (await api.post("/tenants/acme/signing-secrets", headers=other)).status_code == 404
    assert (await api.post("/tenants/nope/signing-secrets", headers=bearer(ADMIN_TOKEN))).status_code == 404
    for bad in (-1, 7 * 86400 + 1, "soon"):
        r = await rotate(api, auth, overlap_seconds=bad)
        assert r.status_code == 422 and r.json()["field"] == "overlap_seconds", r.text

    r = await api.post("/tenants/acme/signing-secrets", headers=auth)  # no body: the default overlap
    assert r.status_code == 201, r.text
    body = r.json()
    assert set(body) == {"signing_secret", "previous_expires_at"} and SECRET_FORM.fullmatch(
        body["signing_secret"]
    )
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT signing_secret, previous_signing_secret, previous_expires_at - now() AS left FROM tenants "
            "WHERE id = 'acme'"
        )
    assert row["signing_secret"] == body["signing_secret"]
    assert row["previous_signing_secret"] == tenant["signing_secret"]
    overlap = settings.signing_secret_overlap_seconds
    assert overlap - 60 < row["left"].total_seconds() <= overlap

    # Rotating again at once (a leaked secret) with no overlap: the oldest is gone, the last one expires now.
    r = await rotate(api, auth, overlap_seconds=0)
    assert r.status_code == 201
    async with pool.acquire() as conn:
        from app.db.tenants import get_signing_secrets

        secrets = await get_signing_secrets(conn, "acme")
    assert secrets is not None and secrets.current == r.json()["signing_secret"] and secrets.previous is None


async def test_migration_re_encodes_old_secrets_keeping_their_key(fresh_database: str) -> None:
    """Migration 0004 rewrites an old secret as `whsec_` + base64(old string): the HMAC key stays
    the old bytes, and the spec's library reads it the same."""
    url = fresh_database
    await alembic(url, "upgrade", "0003")
    old = "whsec_" + "Ab-_" * 10 + "xyz"  # the old format: URL-safe text, used as the key byte for byte
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("INSERT INTO tenants (id, signing_secret) VALUES ('t', $1)", old)
        await alembic(url, "upgrade", "0004")
        new = await conn.fetchval("SELECT signing_secret FROM tenants WHERE id = 't'")
    finally:
        await conn.close()
    assert SECRET_FORM.fullmatch(new)
    assert signing_key(new) == old.encode() == Webhook(new)._whsecret


async def test_the_workers_key_cache_drops_a_retired_secret_when_its_overlap_ends(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    """A cache TTL far longer than the overlap must not keep the old secret signing past it."""
    keys = SigningKeys(pool, ttl_seconds=3600)
    old = [signing_key(tenant["signing_secret"])]
    assert await keys.get("acme") == old
    new = (await rotate(api, bearer(tenant["api_key"]), overlap_seconds=1)).json()["signing_secret"]
    assert await keys.get("acme") == old  # cached: within the TTL, a worker may sign with the old alone
    keys._cache.clear()
    assert await keys.get("acme") == [signing_key(new), *old]  # the overlap: both, newest first
    await asyncio.sleep(1.2)
    assert await keys.get("acme") == [signing_key(new)]  # the entry ended with the overlap, not the TTL
    with pytest.raises(UnknownTenant):
        await keys.get("nope")
