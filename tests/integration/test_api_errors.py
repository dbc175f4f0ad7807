"""DESIGN §5: every bad input is a clear 4xx JSON error naming the field, writes nothing, never a 500."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from dataclasses import field as default

import asyncpg
import httpx
import pytest

from app.config import Settings
from tests.support import api_client, assert_error, bearer, create_tenant, snapshot


@dataclass(frozen=True)
class Bad:
    method: str
    url: str
    field: str | None
    json: object = None
    content: bytes | None = None  # sent as is, instead of json
    headers: dict[str, str] = default(default_factory=dict)
    status: int = 422
    error: str = "invalid_input"


RUNS = "/tenants/acme/runs"
BATCH = "/tenants/acme/runs/batch"
JOB = "/tenants/acme/jobs/t"
NOOP = {"type": "noop"}
BIG = "x" * 70_000  # over SCHEDULER_MAX_PAYLOAD_BYTES (64 KiB)


def run(field: str, **body: object) -> Bad:
    """POST one run of the job `hello` with these body fields."""
    return Bad("POST", RUNS, field, {"job": "hello", **body})


def job(field: str, **body: object) -> Bad:
    """PUT a noop job with these body fields."""
    return Bad("PUT", JOB, field, {"target": NOOP, **body})


def webhook_headers(headers: dict[str, str]) -> Bad:
    return job("target.headers", target={"type": "http", "url": "http://127.0.0.1/", "headers": headers})


def raw(
    content: bytes, field: str = "body", content_type: str | None = "application/json", url: str = RUNS
) -> Bad:
    """POST these bytes as the body."""
    return Bad(
        "POST", url, field, content=content, headers={"Content-Type": content_type} if content_type else {}
    )


def too_large(bad: Bad) -> Bad:
    return replace(bad, status=413, error="payload_too_large")


def unsupported(bad: Bad) -> Bad:
    return replace(bad, status=415, error="unsupported_media_type")


CASES = {
    # DESIGN §5, one by one.
    "unknown job": run("job", job="nope"),
    "bad cron": job("schedule", schedule="every day"),
    "unknown timezone": job("timezone", timezone="Nowhere/X"),
    "run payload too large": too_large(run("payload", payload=BIG)),
    "job payload too large": too_large(job("payload", payload=[BIG])),
    "scheduled_at without timezone": run("scheduled_at", scheduled_at="2030-01-01T10:00:00"),
    "scheduled_at in year 2999": run("scheduled_at", scheduled_at="2999-01-01T00:00:00Z"),
    "scheduled_at at the end of time": run("scheduled_at", scheduled_at="9999-12-31T23:59:59-12:00"),
    "scheduled_at long past": run("scheduled_at", scheduled_at="2001-01-01T00:00:00Z"),
    "scheduled_at not a date": run("scheduled_at", scheduled_at="tomorrow"),
    "batch over the limit": Bad("POST", BATCH, "runs", {"runs": [{"job": "hello"}] * 1001}),
    "malformed JSON": raw(b'{"job": "hello",'),
    "malformed JSON in a batch": raw(b'{"runs": [}', url=BATCH),
    "malformed JSON in a job": Bad(
        "PUT", JOB, "body", content=b"{target: noop}", headers={"Content-Type": "application/json"}
    ),
    "not UTF-8": raw(b'{"job": "\xff\xfe"}'),
    # A body with no Content-Type is read as JSON (test_hostile_input); another declared type is 415.
    "wrong content type": unsupported(raw(b'{"job": "hello"}', "content-type", content_type="text/plain")),
    "form content type": unsupported(
        raw(b"job=hello", "content-type", content_type="application/x-www-form-urlencoded")
    ),
    "empty body": raw(b""),
    "body is a list": Bad("POST", RUNS, "body", [{"job": "hello"}]),
    "body is null": raw(b"null"),
    "unknown field in a run": run("urgency", urgency=9),
    "unknown field in a batch": Bad("POST", BATCH, "dry_run", {"runs": [{"job": "hello"}], "dry_run": 1}),
    "unknown field in a job": job("cron", cron="* * * * *"),
    "concurrency limit of zero": job("concurrency.limit", concurrency={"limit": 0}),
    "concurrency limit not a number": job("concurrency.limit", concurrency={"limit": "two"}),
    "concurrency key outside the payload": job("concurrency.key", concurrency={"limit": 1, "key": "tenant"}),
    "concurrency key with an empty step": job(
        "concurrency.key", concurrency={"limit": 1, "key": "payload..a"}
    ),
    "unknown field in a concurrency": job("concurrency.burst", concurrency={"limit": 1, "burst": 2}),
    "rate limit of zero": job("rate_limit.limit", rate_limit={"limit": 0, "period_seconds": 1}),
    "rate limit without a period": job("rate_limit.period_seconds", rate_limit={"limit": 1}),
    "rate limit period under a second": job(
        "rate_limit.period_seconds", rate_limit={"limit": 1, "period_seconds": 0.5}
    ),
    "rate limit period over a day": job(
        "rate_limit.period_seconds", rate_limit={"limit": 1, "period_seconds": 86_401}
    ),
    "rate limit key outside the payload": job(
        "rate_limit.key", rate_limit={"limit": 1, "period_seconds": 1, "key": "headers.x"}
    ),
    "rate limit beside a concurrency limit": job(
        "rate_limit", concurrency={"limit": 1}, rate_limit={"limit": 1, "period_seconds": 1}
    ),
    "unknown field in a rate limit": job(
        "rate_limit.burst", rate_limit={"limit": 1, "period_seconds": 1, "burst": 2}
    ),
    "unknown field in a tenant": Bad("POST", "/tenants", "name", {"id": "x", "name": "X"}),
    # What Postgres or the JSON codec cannot hold is refused up front, not left to fail in the database.
    "NUL in a payload": run("payload", payload={"a": "\x00"}),
    "NUL in a payload key": run("payload", payload={"\x00": 1}),
    "NUL in a job payload": job("payload", payload=["\x00"]),
    "integer beyond 64 bits": raw(b'{"job": "hello", "payload": 123456789012345678901234567890}', "payload"),
    "lone surrogate": raw(b'{"job": "hello", "payload": "\\ud800"}', "payload"),
    "payload nested too deep": raw(
        b'{"job": "hello", "payload": ' + b"[" * 300 + b"]" * 300 + b"}", "payload"
    ),
    "NUL in an idempotency key": run("idempotency_key", idempotency_key="a\x00b"),
    "lone surrogate in an idempotency key": raw(
        b'{"job": "hello", "idempotency_key": "\\udc80"}', "idempotency_key"
    ),
    "empty idempotency key": run("idempotency_key", idempotency_key=""),
    "NUL in a webhook header": webhook_headers({"X-A": "a\x00b"}),
    "newline in a webhook header": webhook_headers({"X-A": "a\r\nX-Injected: 1"}),
    "bad webhook header name": webhook_headers({"X A:": "b"}),
    "NUL in a job list cursor": Bad("GET", "/tenants/acme/jobs?cursor=a%00b", "cursor"),
    "run id not a UUID": Bad("GET", "/runs/123", "run_id"),
    "limit not a number": Bad("GET", "/tenants/acme/runs?limit=ten", "limit"),
}


@pytest.fixture
async def acme(api: httpx.AsyncClient) -> dict[str, str]:
    auth = bearer((await create_tenant(api, "acme"))["api_key"])
    r = await api.put("/tenants/acme/jobs/hello", json={"target": NOOP}, headers=auth)
    assert r.status_code == 201, r.text
    return auth


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_bad_input_is_a_clear_4xx_and_writes_nothing(
    api: httpx.AsyncClient, acme: dict[str, str], pool: asyncpg.Pool, case: Bad
) -> None:
    before = await snapshot(pool)
    r = await api.request(
        case.method,
        case.url,
        json=case.json if case.content is None else None,
        content=case.content,
        headers={**acme, **case.headers},
    )
    assert r.status_code < 500, r.text
    assert_error(r, case.status, case.error, field=case.field)
    assert await snapshot(pool) == before


async def test_request_over_the_body_limit_is_413(settings: Settings, pool: asyncpg.Pool) -> None:
    async with api_client(settings, max_request_bytes=4096) as api:
        auth = bearer((await create_tenant(api, "acme"))["api_key"])
        r = await api.put("/tenants/acme/jobs/hello", json={"target": NOOP}, headers=auth)
        assert r.status_code == 201
        before = await snapshot(pool)
        body = b'{"job": "hello", "payload": "' + b"x" * 8000 + b'"}'
        # Declared by Content-Length: refused before the body is read.
        r = await api.post(
            "/tenants/acme/runs", content=body, headers={**auth, "Content-Type": "application/json"}
        )
        assert_error(r, 413, "payload_too_large", field="body")

        # Streamed without a length (chunked): refused once the limit is passed.
        async def chunks() -> AsyncIterator[bytes]:
            for i in range(0, len(body), 1000):
                yield body[i : i + 1000]

        r = await api.post(
            "/tenants/acme/runs", content=chunks(), headers={**auth, "Content-Type": "application/json"}
        )
        assert_error(r, 413, "payload_too_large", field="body")
        assert await snapshot(pool) == before


async def test_unknown_route_and_method_are_json(api: httpx.AsyncClient, acme: dict[str, str]) -> None:
    assert_error(await api.get("/nowhere", headers=acme), 404, "not_found")
    assert_error(await api.delete("/tenants/acme/runs", headers=acme), 405, "method_not_allowed")
