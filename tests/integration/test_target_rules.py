"""A job's webhook target through the API (issue 12, items 9 and 10): every IPv4-embedding and
metadata form of a forbidden address is a 422 naming `target.url`, framing and hop-by-hop headers and
header values that are not visible ASCII a 422 naming `target.headers`, a `body` other than `payload`
or `envelope` a 422 naming `target.body`, with nothing written, beside a well-behaved job that is
accepted; and a job stored before a header was reserved cannot make the worker send it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.config import Settings
from app.worker.targets import call_http
from tests.integration.test_security_webhooks import CONTEXT
from tests.receiver import running_receiver
from tests.support import api_client, bearer, create_tenant
from tests.unit.test_target_addresses import FORBIDDEN, METADATA_FORMS


def url_of(address: str) -> str:
    host = f"[{address.replace('%', '%25')}]" if ":" in address else address
    return f"http://{host}/hook"


@pytest.fixture
async def strict(settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str]]]:
    async with api_client(settings, allow_private_targets=False) as api:
        yield api, bearer((await create_tenant(api, "acme"))["api_key"])


async def jobs(api: httpx.AsyncClient, auth: dict[str, str]) -> list[str]:
    r = await api.get("/tenants/acme/jobs", headers=auth)
    return [j["name"] for j in r.json()["jobs"]]


async def test_every_forbidden_address_form_is_a_422_naming_target_url(strict: tuple) -> None:
    api, auth = strict
    accepted = []
    for i, (address, why) in enumerate(FORBIDDEN):
        if "%" in address:
            continue  # a zone id is for link-local use on this host; covered by the unit table
        r = await api.put(
            f"/tenants/acme/jobs/j{i}",
            json={"target": {"type": "http", "url": url_of(address)}},
            headers=auth,
        )
        if r.status_code != 422 or r.json().get("field") != "target.url":
            accepted.append(f"{address} ({why}): {r.status_code} {r.text}")
    assert not accepted, "\n".join(accepted)
    assert await jobs(api, auth) == []  # nothing written
    # The well-behaved neighbour: a public address literal is accepted (and never called here).
    r = await api.put(
        "/tenants/acme/jobs/ok",
        json={"target": {"type": "http", "url": "http://93.184.215.14/hook"}},
        headers=auth,
    )
    assert r.status_code == 201, r.text


async def test_metadata_is_refused_even_where_private_targets_are_allowed(
    api: httpx.AsyncClient, tenant: dict
) -> None:
    auth = bearer(tenant["api_key"])  # this API allows private targets, as dev and tests do
    for address in METADATA_FORMS:
        r = await api.put(
            "/tenants/acme/jobs/meta", json={"target": {"type": "http", "url": url_of(address)}}, headers=auth
        )
        assert r.status_code == 422 and r.json()["field"] == "target.url", (address, r.text)
    r = await api.put(
        "/tenants/acme/jobs/local",
        json={"target": {"type": "http", "url": "http://127.0.0.1:9/hook"}},
        headers=auth,
    )
    assert r.status_code == 201, r.text


@pytest.mark.parametrize(
    "header",
    [
        "Transfer-Encoding",
        "content-length",
        "Connection",
        "Keep-Alive",
        "Proxy-Authorization",
        "TE",
        "Trailer",
        "Upgrade",
        "Host",
        "Expect",
        "Content-Encoding",
        "webhook-signature",
        "Webhook-Id",
    ],
)
async def test_framing_and_hop_by_hop_headers_are_a_422_naming_target_headers(
    api: httpx.AsyncClient, tenant: dict, header: str
) -> None:
    auth = bearer(tenant["api_key"])
    target = {
        "type": "http",
        "url": "http://127.0.0.1:9/hook",
        "headers": {"X-Team": "blue", header: "chunked"},
    }
    r = await api.put("/tenants/acme/jobs/framing", json={"target": target}, headers=auth)
    assert r.status_code == 422 and r.json()["field"] == "target.headers", r.text
    assert (await api.get("/tenants/acme/jobs/framing", headers=auth)).status_code == 404
    del target["headers"][header]
    assert (
        await api.put("/tenants/acme/jobs/framing", json={"target": target}, headers=auth)
    ).status_code == 201


@pytest.mark.parametrize(
    "value",
    [
        "é☃",  # beyond ASCII: UnicodeEncodeError at every attempt
        "caf\u00e9",
        " leading",  # h11: "Illegal header value", at every attempt
        "trailing\t",
        "a\r\nX-Injected: 1",
        "a\x00b",
        "a\x7f",
    ],
)
async def test_a_header_value_that_is_not_visible_ascii_is_a_422_naming_the_header(
    api: httpx.AsyncClient, tenant: dict, value: str
) -> None:
    auth = bearer(tenant["api_key"])
    target = {"type": "http", "url": "http://127.0.0.1:9/hook", "headers": {"X-Team": "blue", "X-A": value}}
    r = await api.put("/tenants/acme/jobs/hdr", json={"target": target}, headers=auth)
    assert r.status_code == 422 and r.json()["field"] == "target.headers", r.text
    assert r.json()["detail"].startswith("target.headers['X-A']: a header value is visible ASCII"), r.text
    assert (await api.get("/tenants/acme/jobs/hdr", headers=auth)).status_code == 404


async def test_visible_ascii_header_values_with_inner_spaces_and_tabs_reach_the_target(
    api: httpx.AsyncClient, tenant: dict
) -> None:
    """The well-behaved side of the rule: what it accepts, the worker sends as it is."""
    auth = bearer(tenant["api_key"])
    headers = {
        "X-Team": "blue",
        "X-Spaced": "a b\tc",
        "X-Empty": "",
        "X-Symbols": "!#$%&'*+-.^_`|~\"(),/:;<=>?@[]{}",
    }
    async with running_receiver() as receiver, httpx.AsyncClient() as client:
        target = {"type": "http", "url": receiver.url, "headers": headers}
        r = await api.put("/tenants/acme/jobs/hdr", json={"target": target}, headers=auth)
        assert r.status_code == 201, r.text
        await call_http(client, r.json()["target"], {"a": 1}, CONTEXT, [b"k" * 32], 5, True)
    [call] = receiver.calls
    assert {name: call.headers[name.lower()] for name in headers} == headers


async def test_a_stored_job_naming_framing_headers_cannot_make_the_worker_send_them() -> None:
    """A job saved before the rule still names Transfer-Encoding: the worker drops it, so the
    receiver gets one framing (Content-Length) and the job's own headers."""
    target = {
        "type": "http",
        "headers": {
            "Transfer-Encoding": "chunked",
            "connection": "upgrade",
            "X-Team": "blue",
            "webhook-id": "forged",
        },
    }
    async with running_receiver() as receiver, httpx.AsyncClient() as client:
        target["url"] = receiver.url
        await call_http(client, target, {"a": 1}, CONTEXT, [b"k" * 32], 5, True)
    [call] = receiver.calls
    assert "transfer-encoding" not in call.headers and call.headers["content-length"] == str(len(call.body))
    assert call.headers["x-team"] == "blue" and call.headers["webhook-id"] == CONTEXT.run_id
    assert call.payload == {"a": 1}


async def test_a_target_body_other_than_payload_or_envelope_is_a_422_naming_target_body(
    api: httpx.AsyncClient, tenant: dict
) -> None:
    auth = bearer(tenant["api_key"])
    http = {"type": "http", "url": "http://127.0.0.1:9/hook"}
    before = await jobs(api, auth)
    for target in (
        {**http, "body": "raw"},
        {**http, "body": "Payload"},
        {**http, "body": None},
        {**http, "body": 1},
        {**http, "body": ["payload"]},
        {"type": "python", "handler": "echo", "body": "payload"},  # only a webhook has a body
    ):
        r = await api.put("/tenants/acme/jobs/shaped", json={"target": target}, headers=auth)
        assert r.status_code == 422 and r.json()["field"] == "target.body", (target, r.text)
        assert (await api.get("/tenants/acme/jobs/shaped", headers=auth)).status_code == 404
    assert await jobs(api, auth) == before  # nothing written
    for body in ("payload", "envelope"):
        r = await api.put("/tenants/acme/jobs/shaped", json={"target": {**http, "body": body}}, headers=auth)
        assert r.status_code in (200, 201) and r.json()["target"]["body"] == body, r.text
    r = await api.put("/tenants/acme/jobs/default", json={"target": http}, headers=auth)
    assert r.status_code == 201 and r.json()["target"]["body"] == "payload", r.text
