"""Retries below the generated endpoints, as httpx transports: a 429 or 503 (the API wrote nothing)
waits its Retry-After and goes again; so does a request that never reached the server, and one
whose answer was lost when sending it again is harmless: a read, or a keyed submission, which the
API answers with the run it already made — or, while the first request is still being processed,
with a 409 naming the key, which is waited out too. The request is re-sent as it was, headers
included, so a submission keeps its Idempotency-Key on every attempt."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

RETRIED_STATUSES = frozenset({429, 503})
# The request never left: always safe to send again.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# The request may have been processed and its answer lost.
ANSWER_LOST = (
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
    httpx.ReadTimeout,
    httpx.WriteTimeout,
)
REPEATABLE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
BATCH_PATH_END = "/runs/batch"


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` in all (1: no retry); between them, the answer's Retry-After when it gives one
    (up to `max_retry_after`: asked to wait longer, the client gives up at once) or an exponential
    backoff from `backoff` seconds, doubled each time up to `max_backoff`, jittered."""

    attempts: int = 5
    backoff: float = 0.5
    max_backoff: float = 8.0
    max_retry_after: float = 60.0

    def delay(
        self, attempt: int, request: httpx.Request, response: httpx.Response | None, error: Exception | None
    ) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None: no other attempt."""
        if attempt >= self.attempts:
            return None
        if response is not None:
            if response.status_code not in RETRIED_STATUSES and not (
                response.status_code == 409 and _keyed(request)
            ):
                return None
            after = retry_after(response.headers.get("Retry-After"))
            if after is not None:
                return after if after <= self.max_retry_after else None
        elif not (isinstance(error, NOT_SENT) or (isinstance(error, ANSWER_LOST) and _repeatable(request))):
            return None
        ceiling = min(self.max_backoff, self.backoff * 2.0 ** (attempt - 1))
        # Half fixed, half random: clients that failed together do not all come back together.
        return ceiling / 2 + random.uniform(0, ceiling / 2)


def _keyed(request: httpx.Request) -> bool:
    """A submission the API makes runs of once, whatever the attempts: one with its Idempotency-Key,
    or a batch (this client gives each of its runs a key)."""
    return "Idempotency-Key" in request.headers or (
        request.method == "POST" and request.url.path.endswith(BATCH_PATH_END)
    )


def _repeatable(request: httpx.Request) -> bool:
    return request.method in REPEATABLE_METHODS or _keyed(request)


def retry_after(value: str | None) -> float | None:
    """Retry-After in seconds: a number of seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


class RetryingTransport(httpx.BaseTransport):
    def __init__(self, policy: RetryPolicy, inner: httpx.BaseTransport | None = None):
        self.policy = policy
        self.inner = inner or httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        attempt = 1
        while True:
            try:
                response = self.inner.handle_request(request)
            except httpx.TransportError as error:
                if (delay := self.policy.delay(attempt, request, None, error)) is None:
                    raise
            else:
                if (delay := self.policy.delay(attempt, request, response, None)) is None:
                    return response
                response.close()
            time.sleep(delay)
            attempt += 1

    def close(self) -> None:
        self.inner.close()


class AsyncRetryingTransport(httpx.AsyncBaseTransport):
    def __init__(self, policy: RetryPolicy, inner: httpx.AsyncBaseTransport | None = None):
        self.policy = policy
        self.inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        attempt = 1
        while True:
            try:
                response = await self.inner.handle_async_request(request)
            except httpx.TransportError as error:
                if (delay := self.policy.delay(attempt, request, None, error)) is None:
                    raise
            else:
                if (delay := self.policy.delay(attempt, request, response, None)) is None:
                    return response
                await response.aclose()
            await asyncio.sleep(delay)
            attempt += 1

    async def aclose(self) -> None:
        await self.inner.aclose()
