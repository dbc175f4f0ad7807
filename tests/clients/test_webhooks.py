"""verify_webhook on real deliveries: a worker calls the local receiver with the tenant's
signature; the body (the run's payload, an envelope when the job asks for one, a completion
callback's envelope) verifies with the tenant's secret and with nothing else, and across a secret
rotation every delivery verifies with whichever secrets the receiver holds."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
import standardwebhooks
from scheduler_client import AsyncClient, WebhookVerificationError, verify_webhook

from stack.eventually import eventually
from tests.clients.conftest import Account, Live, new_account
from tests.receiver import Call


async def _delivered(live: Live, client: AsyncClient, tenant: str, payload: object) -> Call:
    run = await client.submit_run(tenant, "hook", payload)
    await client.wait(run.id, timeout=30)
    [call] = await eventually(lambda: live.receiver.for_run(str(run.id)), what="the delivery")
    return call


async def _hook(client: AsyncClient, tenant: str, url: str, **target: Any) -> None:
    await client.put_job(tenant, "hook", target={"type": "http", "url": url, **target})


async def test_a_delivery_verifies_with_its_tenants_secret_only(live: Live, account: Account) -> None:
    await live.worker()
    async with AsyncClient(live.url, account.api_key) as client, new_account(live) as other:
        await _hook(client, account.id, live.receiver.url)
        call = await _delivered(live, client, account.id, {"user": 7})

        # The body is the run's payload itself.
        assert call.body == b'{"user":7}'
        assert verify_webhook(account.secret, call.headers, call.body) == {"user": 7}
        # Any mapping of headers, in any case; the body as text too.
        headers = httpx.Headers({k.upper(): v for k, v in call.headers.items()})
        assert verify_webhook(account.secret, headers, call.body.decode()) == {"user": 7}

        refusals = [
            (account.secret, call.headers, call.body.replace(b'"user":7', b'"user":8')),  # altered
            (other.secret, call.headers, call.body),  # another tenant's secret
            (account.secret, {k: v for k, v in call.headers.items() if k != "webhook-signature"}, call.body),
            (account.secret, {**call.headers, "webhook-id": "another-run"}, call.body),  # the id is signed
        ]
        for secret, hdrs, body in refusals:
            with pytest.raises(WebhookVerificationError):
                verify_webhook(secret, hdrs, body)
        # It is the spec library's error too, for code that already catches that one.
        with pytest.raises(standardwebhooks.WebhookVerificationError):
            verify_webhook(other.secret, call.headers, call.body)


async def test_any_json_payload_is_the_verified_body(live: Live, account: Account) -> None:
    await live.worker()
    async with AsyncClient(live.url, account.api_key) as client:
        await _hook(client, account.id, live.receiver.url)
        for payload in ([1, "two"], "text", 3):
            call = await _delivered(live, client, account.id, payload)
            assert verify_webhook(account.secret, call.headers, call.body) == payload


async def test_an_envelope_job_verifies_to_its_envelope(live: Live, account: Account) -> None:
    await live.worker()
    async with AsyncClient(live.url, account.api_key) as client:
        await _hook(client, account.id, live.receiver.url, body="envelope")
        call = await _delivered(live, client, account.id, {"user": 9})

    event = verify_webhook(account.secret, call.headers, call.body)
    assert event["type"] == "run.attempt"
    data = event["data"]
    assert (data["tenant_id"], data["job"], data["payload"]) == (account.id, "hook", {"user": 9})
    assert (data["run_id"], data["attempt"]) == (call.headers["webhook-id"], 1)
    assert data["url"] == live.receiver.url


async def test_a_completion_callback_verifies_to_the_finished_run(live: Live, account: Account) -> None:
    await live.worker()
    async with AsyncClient(live.url, account.api_key) as client:
        await client.put_job(account.id, "quick", target={"type": "noop"})
        callback = {"url": live.receiver.url, "on": ["succeeded"]}
        run = await client.submit_run(account.id, "quick", {"n": 1}, callback=callback)
        [call] = await eventually(lambda: live.receiver.callbacks_for(str(run.id)), what="the callback")

    event = verify_webhook(account.secret, call.headers, call.body)
    assert event["type"] == "run.completed"
    assert (event["data"]["id"], event["data"]["status"]) == (str(run.id), "succeeded")
    assert event["data"]["payload"] == {"n": 1}


async def test_every_secret_of_a_rotation_verifies(live: Live, account: Account) -> None:
    await live.worker()
    async with AsyncClient(live.url, account.api_key) as client:
        await _hook(client, account.id, live.receiver.url)
        before = await _delivered(live, client, account.id, {"n": 1})
        old = account.secret
        new = (await client.rotate_signing_secret(account.id, overlap_seconds=3600)).signing_secret
        await asyncio.sleep(live.settings.signing_secret_cache_seconds * 2)  # the worker's cache of secrets
        during = await _delivered(live, client, account.id, {"n": 2})

    assert len(during.headers["webhook-signature"].split()) == 2  # signed under both
    for secret in (old, new, [new, old], [old, new]):
        assert verify_webhook(secret, during.headers, during.body) == {"n": 2}
    # A receiver that switched to the new secret keeps the old one for deliveries signed before.
    with pytest.raises(WebhookVerificationError):
        verify_webhook(new, before.headers, before.body)
    assert verify_webhook([new, old], before.headers, before.body) == {"n": 1}
    with pytest.raises(ValueError, match="at least one secret"):
        verify_webhook([], during.headers, during.body)
