"""Executing a run's target: an HTTP webhook, a registered Python handler, or nothing (noop).

Webhooks are signed: `Scheduler-Signature: v1=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>` with
`Scheduler-Timestamp: <unix seconds>`, under the tenant's signing secret. The host is resolved and
checked before every request, and the request goes to the address that passed the check (with the
original Host header and TLS server name), so a DNS answer that changes between check and connect
cannot redirect it to a private address. Redirects are not followed."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import orjson

from app.services.targets import HANDLER_GROUP, resolve_allowed

MAX_ERROR_BODY = 300


@dataclass(frozen=True)
class RunContext:
    run_id: str
    tenant_id: str
    job: str
    attempt: int
    epoch: int
    traceparent: str | None


class AttemptFailed(Exception):
    """The target answered, and the answer is a failure (non-2xx)."""


Handler = Callable[[Any, RunContext], Awaitable[None]]


def load_handlers() -> dict[str, Handler]:
    return {ep.name: ep.load() for ep in entry_points(group=HANDLER_GROUP)}


def sign(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def _host_for_url(address: str) -> str:
    return f"[{address}]" if ":" in address else address


async def call_http(
    client: httpx.AsyncClient,
    target: dict[str, Any],
    payload: Any,
    context: RunContext,
    secret: str,
    timeout: float,
    allow_private: bool,
) -> None:
    body = orjson.dumps(payload)
    timestamp = int(time.time())
    parts = urlsplit(target["url"])
    assert parts.hostname is not None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = (await resolve_allowed(parts.hostname, port, allow_private=allow_private))[0]
    pinned = urlunsplit(parts._replace(netloc=f"{_host_for_url(address)}:{port}"))
    headers = {
        **target.get("headers", {}),
        "Host": parts.netloc.rsplit("@", 1)[-1],
        "Content-Type": "application/json",
        "Scheduler-Run-Id": context.run_id,
        "Scheduler-Attempt": str(context.attempt),
        "Scheduler-Epoch": str(context.epoch),
        "Scheduler-Timestamp": str(timestamp),
        "Scheduler-Signature": sign(secret, timestamp, body),
    }
    if context.traceparent:
        headers["traceparent"] = context.traceparent
    response = await client.request(
        target.get("method", "POST"),
        pinned,
        content=body,
        headers=headers,
        timeout=timeout,
        follow_redirects=False,
        extensions={"sni_hostname": parts.hostname} if parts.scheme == "https" else {},
    )
    if not 200 <= response.status_code < 300:
        raise AttemptFailed(f"HTTP {response.status_code}: {response.text[:MAX_ERROR_BODY]}")
