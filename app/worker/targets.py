"""Executing a run's target: an HTTP webhook, a registered Python handler, or nothing (noop).

Webhooks follow Standard Webhooks (docs/webhooks.md): the signature (`webhook-id` = the run id,
`webhook-timestamp`, `webhook-signature` over "<id>.<timestamp>.<body>") covers the body, which is
the run's payload as the API answers it, so any HTTP API can be a target; a target with `"body":
"envelope"` gets the spec's envelope instead, which names the run, its attempt, epoch and target
URL beside the payload, so the signature covers those too. The host is resolved and checked before
every request, and the request goes to the address that passed the check (with the original Host
header and TLS server name), so a DNS answer that changes between check and connect cannot redirect
it to a private address. Redirects are not followed.

What a target answers is hostile too: its body is read only as far as it is kept (a success's
result up to SCHEDULER_MAX_RESULT_BYTES, a failure's excerpt up to RESPONSE_EXCERPT_BYTES), the
rest is never read, and the connection is dropped. Decoded whole, one 256 MiB answer took a
worker from 96 to 611 MiB, and four at once to about 2 GB."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import entry_points
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import orjson

from app.domain import StoredResult, dump_json
from app.services.answers import RETRY_AFTER_STATUSES, result_of_body, retry_after_seconds
from app.services.signing import signature_header
from app.services.targets import HANDLER_GROUP, is_reserved_header, resolve_allowed

MAX_ERROR_BODY = 300  # characters of a failed answer kept in the run's last_error
RESPONSE_EXCERPT_BYTES = 4 * MAX_ERROR_BODY  # enough bytes for that many characters of UTF-8
READ_CHUNK = 16 * 1024


@dataclass(frozen=True)
class RunContext:
    run_id: str
    tenant_id: str
    job: str
    attempt: int
    epoch: int
    traceparent: str | None
    # Its parents' results by ref or id, when it was submitted with pass_results (docs/dependencies.md).
    parents: dict[str, Any] | None = None


class AttemptFailed(Exception):
    """The target answered, and the answer is a failure (non-2xx): its status, and the delay it
    asked for (a bounded Retry-After of a 429 or 503), if any."""

    def __init__(self, message: str, http_status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.http_status = http_status
        self.retry_after = retry_after


@dataclass(frozen=True)
class AnswerLimits:
    """How much of a webhook's answer is kept: the result's bytes and depth (a payload's), a
    Retry-After's seconds."""

    max_result_bytes: int = 64 * 1024
    max_retry_after_seconds: float = 3600.0
    max_result_depth: int = 32


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes  # at most the limit asked for, plus one byte when there was more
    content_type: str | None
    retry_after: str | None


# A handler's return value, if JSON, becomes the run's result.
Handler = Callable[[Any, RunContext], Awaitable[Any]]


def load_handlers() -> dict[str, Handler]:
    return {ep.name: ep.load() for ep in entry_points(group=HANDLER_GROUP)}


@dataclass(frozen=True)
class WebhookRequest:
    """What call_http sends: built and signed before anything goes on the wire."""

    method: str
    url: str  # the checked address, not the name
    headers: dict[str, str]
    body: bytes
    extensions: dict[str, Any] = field(default_factory=dict)


def request_body(target: dict[str, Any], payload: Any, context: RunContext, timestamp: int) -> bytes:
    """What is sent and signed. The payload is encoded as GET /runs/{id} answers it (one encoding,
    app.domain.dump_json), so a target receives the very bytes the API shows (`null` for a null
    payload). A job saved before targets had `body` gets the payload too."""
    if target.get("body") == "envelope":
        return envelope(target, payload, context, timestamp)
    if context.parents is not None:
        # A run that passes its parents' results: the payload and the results side by side.
        return dump_json({"payload": payload, "parents": context.parents})
    return dump_json(payload)


def envelope(target: dict[str, Any], payload: Any, context: RunContext, timestamp: int) -> bytes:
    """The signed body, in the spec's recommended shape. Everything a receiver decides on is inside
    it: a captured request re-sent with another epoch, or to another URL of the tenant, fails
    verification; the `Scheduler-*` headers only repeat some of it, unsigned."""
    return orjson.dumps(
        {
            "type": "run.attempt",
            "timestamp": datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z"),
            "data": {
                "run_id": context.run_id,
                "tenant_id": context.tenant_id,
                "job": context.job,
                "attempt": context.attempt,
                "epoch": context.epoch,
                "method": target.get("method", "POST"),
                "url": target["url"],
                "payload": payload,
                **({"parents": context.parents} if context.parents is not None else {}),
            },
        }
    )


def _host_for_url(address: str) -> str:
    return f"[{address}]" if ":" in address else address


@dataclass(frozen=True)
class PinnedUrl:
    """A URL whose host was resolved and checked, rewritten to the address that passed the check."""

    url: str
    host: str  # the Host header: the name as the URL gave it
    extensions: dict[str, Any]  # the TLS server name, for https


async def pin(url: str, allow_private: bool, field: str = "target.url") -> PinnedUrl:
    """Resolve and check the URL's host (InvalidInput naming `field` if it may not be reached)."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = (await resolve_allowed(parts.hostname, port, allow_private=allow_private, field=field))[0]
    pinned = urlunsplit(parts._replace(netloc=f"{_host_for_url(address)}:{port}"))
    extensions = {"sni_hostname": parts.hostname} if parts.scheme == "https" else {}
    return PinnedUrl(pinned, parts.netloc.rsplit("@", 1)[-1], extensions)


async def build_request(
    target: dict[str, Any],
    payload: Any,
    context: RunContext,
    signing_keys: list[bytes],
    allow_private: bool,
) -> WebhookRequest:
    """Resolve and check the host, build the body and sign it. `signing_keys`: the tenant's
    valid keys, newest first (two during a rotation's overlap)."""
    timestamp = int(time.time())
    body = request_body(target, payload, context, timestamp)
    pinned = await pin(target["url"], allow_private)
    # A job saved before a header was reserved may still name it: dropped here, not sent.
    headers = {k: v for k, v in target.get("headers", {}).items() if not is_reserved_header(k)}
    headers |= {
        "Host": pinned.host,
        "Content-Type": "application/json",
        "webhook-id": context.run_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature_header(signing_keys, context.run_id, timestamp, body),
        "Scheduler-Run-Id": context.run_id,
        "Scheduler-Attempt": str(context.attempt),
        "Scheduler-Epoch": str(context.epoch),
    }
    if context.traceparent:
        headers["traceparent"] = context.traceparent
    return WebhookRequest(target.get("method", "POST"), pinned.url, headers, body, pinned.extensions)


async def call_http(
    client: httpx.AsyncClient,
    target: dict[str, Any],
    payload: Any,
    context: RunContext,
    signing_keys: list[bytes],
    timeout: float,
    allow_private: bool,
    limits: AnswerLimits = AnswerLimits(),
) -> tuple[int, StoredResult]:
    """Call the webhook; answer its status and result, or raise AttemptFailed for a non-2xx answer."""
    request = await build_request(target, payload, context, signing_keys, allow_private)
    sendable = client.build_request(
        request.method,
        request.url,
        content=request.body,
        headers=request.headers,
        timeout=timeout,
        extensions=request.extensions,
    )

    def keep(status: int) -> int:
        # One byte past the result's bound tells a body that was cut from one that fit exactly.
        return limits.max_result_bytes + 1 if 200 <= status < 300 else RESPONSE_EXCERPT_BYTES

    answer = await send_bounded(client, sendable, keep)
    if 200 <= answer.status < 300:
        return answer.status, result_of_body(
            answer.body, answer.content_type, limits.max_result_bytes, max_depth=limits.max_result_depth
        )
    text = answer.body.decode("utf-8", errors="replace")[:MAX_ERROR_BODY]
    retry_after = None
    if answer.status in RETRY_AFTER_STATUSES:
        retry_after = retry_after_seconds(answer.retry_after, limits.max_retry_after_seconds)
    raise AttemptFailed(f"HTTP {answer.status}: {text}", answer.status, retry_after)


async def send_bounded(
    client: httpx.AsyncClient, request: httpx.Request, limit: Callable[[int], int]
) -> Answer:
    """Send `request`; answer its status, the headers we use and at most `limit(status)` bytes of
    its body, as sent (a body the target compressed anyway stays compressed: inflating it is where
    a small answer becomes a huge one). Leaving the stream unread and closed drops the connection
    instead of draining the rest."""
    response = await client.send(request, stream=True, follow_redirects=False)
    try:
        body = await read_bounded(response, limit(response.status_code))
        headers = response.headers
        return Answer(response.status_code, body, headers.get("content-type"), headers.get("retry-after"))
    finally:
        await response.aclose()


async def read_bounded(response: httpx.Response, limit: int) -> bytes:
    """At most `limit` bytes of a streamed response's body; what lies beyond is never read."""
    if limit <= 0:
        return b""
    if response.is_stream_consumed:  # a transport that read the body itself: it is in memory already
        return response.content[:limit]
    kept = bytearray()
    async for chunk in response.aiter_raw(READ_CHUNK):
        kept += chunk[: limit - len(kept)]
        if len(kept) >= limit:
            break
    return bytes(kept)
