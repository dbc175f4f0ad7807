"""A front door between a client and the real API, for the client's retry tests: it forwards every
request to the API and records it, except those it is told to answer otherwise — a 503 with
Retry-After (as a restarting API or a load balancer answers), or an answer held back past the
client's timeout (a lost answer: the API did the work, the client never heard)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.dev import free_port
from tests.support import serving

UNAVAILABLE = b'{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"restarting","code":"unavailable"}'
# What the API answers a submission whose key another request is still processing.
IN_FLIGHT = (
    b'{"type":"about:blank","title":"Conflict","status":409,"code":"conflict","field":"idempotency_key",'
    b'"detail":"a request with this idempotency key is still in flight; retry once it has finished"}'
)


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    at: float
    status: int = 0  # what the client was answered (0: nothing, the answer was held back)


@dataclass
class Front:
    """`script`: what to do with the next requests, one entry each: "503" or "503:<retry after>"
    (answered here), "409" (answered here as the API answers a key still in flight), "hold:<seconds>"
    (forwarded, its answer held back that long); when it runs out, every request is forwarded."""

    upstream: str
    port: int
    script: list[str] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def posts(self) -> list[Seen]:
        return [s for s in self.seen if s.method == "POST"]


async def _handle(request: Request) -> Response:
    front: Front = request.app.state.front
    upstream: httpx.AsyncClient = request.app.state.upstream
    seen = Seen(request.method, request.url.path, dict(request.headers), time.monotonic())
    front.seen.append(seen)
    step = front.script.pop(0) if front.script else "forward"
    if step.startswith("503"):
        retry_after = step.partition(":")[2] or "1"
        seen.status = 503
        return Response(UNAVAILABLE, 503, {"Retry-After": retry_after}, media_type="application/problem+json")
    if step == "409":
        seen.status = 409
        return Response(IN_FLIGHT, 409, media_type="application/problem+json")
    headers = {k: v for k, v in request.headers.items() if k not in ("host", "content-length")}
    answer = await upstream.request(
        request.method,
        request.url.path,
        params=request.query_params,
        content=await request.body(),
        headers=headers,
    )
    if step.startswith("hold"):
        await asyncio.sleep(float(step.partition(":")[2]))
    else:
        seen.status = answer.status_code
    excluded = ("content-length", "content-encoding", "transfer-encoding", "connection")
    return Response(
        answer.content, answer.status_code, {k: v for k, v in answer.headers.items() if k not in excluded}
    )


@contextlib.asynccontextmanager
async def running_front(upstream: str, port: int | None = None) -> AsyncIterator[Front]:
    front = Front(upstream, port or free_port())
    app = Starlette(
        routes=[Route("/{path:path}", _handle, methods=["GET", "POST", "PUT", "DELETE", "PATCH"])]
    )
    app.state.front = front
    async with httpx.AsyncClient(base_url=upstream, timeout=30) as client:
        app.state.upstream = client
        async with serving(app, front.port):
            yield front
