"""verify_webhook on real deliveries: a worker calls the local receiver with the tenant's
signature; the body verifies with the tenant's secret and with nothing else, and across a secret
rotation every delivery verifies with whichever secrets the receiver holds."""

from __future__ import annotations

import asyncio

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


async def test_a_delivery_verifies_with_its_tenants_secret_only(live: Live, account: Account) -> None:
    await live.worker()
    async with AsyncClient(live.url, account.api_key) as client, new_account(live) as other:
        await client.put_job(account.id, "hook", target={"type": "http", "url": live.receiver.url})
        call = await _delivered(live, client, account.id, {"user": 7})

        event = verify_webhook(account.secret, call.headers, call.body)
        assert event["type"] == "run.attempt"
        assert (event["data"]["tenant_id"], event["data"]["payload"]) == (account.id, {"user": 7})
        assert event["data"]["run_id"] == call.headers["webhook-id"]
        # Any mapping of headers, in any case; the body as text too.
        headers = httpx.Headers({k.upper(): v for k, v in call.headers.items()})
        assert verify_webhook(account.secret, headers, call.body.decode()) == event

        refusals = [
            (account.secret, call.headers, call.body.replace(b'"user":7', b'"user":8')),  # altered
            (other.secret, call.headers, call.body),  # another tenant's secret
            (account.secret, {k: v for k, v in call.headers.items() if k != "webhook-signature"}, call.body),
        ]
        for secret, hdrs, body in refusals:
            with pytest.raises(WebhookVerificationError):
                verify_webhook(secret, hdrs, body)
        # It is the spec library's error too, for code that already catches that one.
        with pytest.raises(standardwebhooks.WebhookVerificationError):
            verify_webhook(other.secret, call.headers, call.body)


async def test_every_secret_of_a_rotation_verifies(live: Live, account: Account) -> None:
    await live.worker()
    async with AsyncClient(live.url, account.api_key) as client:
        await client.put_job(account.id, "hook", target={"type": "http", "url": live.receiver.url})
        before = await _delivered(live, client, account.id, {"n": 1})
        old = account.secret
        new = (await client.rotate_signing_secret(account.id, overlap_seconds=3600)).signing_secret
        await asyncio.sleep(live.settings.signing_secret_cache_seconds * 2)  # the worker's cache of secrets
        during = await _delivered(live, client, account.id, {"n": 2})

    assert len(during.headers["webhook-signature"].split()) == 2  # signed under both
    for secret in (old, new, [new, old], [old, new]):
        assert verify_webhook(secret, during.headers, during.body)["data"]["payload"] == {"n": 2}
    # A receiver that switched to the new secret keeps the old one for deliveries signed before.
    with pytest.raises(WebhookVerificationError):
        verify_webhook(new, before.headers, before.body)
    assert verify_webhook([new, old], before.headers, before.body)["data"]["payload"] == {"n": 1}
    with pytest.raises(ValueError, match="at least one secret"):
        verify_webhook([], during.headers, during.body)
