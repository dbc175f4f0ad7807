"""A local webhook receiver for end-to-end tests: records every call, answers as scripted."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from app.dev import free_port
from app.telemetry.ops_server import HostedServer


@dataclass
class Call:
    headers: dict[str, str]
    body: bytes

    @property
    def envelope(self) -> Any:
        """The signed body: {"type", "timestamp", "data": {"run_id", ..., "payload"}}."""
        return orjson.loads(self.body)

    @property
    def payload(self) -> Any:
        """The run's payload, out of the envelope."""
        return self.envelope["data"]["payload"]


@dataclass
class Receiver:
    url: str = ""
    calls: list[Call] = field(default_factory=list)

    def for_run(self, run_id: str) -> list[Call]:
        return [c for c in self.calls if c.headers.get("scheduler-run-id") == run_id]


async def _handle(request: Request) -> Response:
    receiver: Receiver = request.app.state.receiver
    try:
        body = await request.body()
    except ClientDisconnect:  # the caller died mid-request (a fault test): the call never arrived
        return Response(status_code=499)
    call = Call(dict(request.headers), body)
    receiver.calls.append(call)
    payload = call.payload if body else {}
    # Scripted behaviour from the payload: {"statuses": [500, 500, 200]} answers by attempt number;
    # {"sleep": s} holds the request open for s seconds first; {"redirect": url} answers 302 to url.
    # Hostile answers: {"poison": status} a body with a NUL and invalid UTF-8; {"stream_mib": n,
    # "status": s} n MiB generated on the fly.
    if isinstance(payload, dict):
        if payload.get("sleep"):
            # In steps, so a caller that gave up (a timeout, a stopped worker) frees the handler.
            until = asyncio.get_running_loop().time() + float(payload["sleep"])
            while asyncio.get_running_loop().time() < until and not await request.is_disconnected():
                await asyncio.sleep(min(0.1, until - asyncio.get_running_loop().time()))
        if payload.get("redirect"):
            return Response(status_code=302, headers={"Location": str(payload["redirect"])})
        if payload.get("poison"):
            return Response(b"bad\x00body \xff\xfe \xed\xa0\x80", status_code=int(payload["poison"]))
        if payload.get("stream_mib"):
            return StreamingResponse(
                _generate(int(payload["stream_mib"])), status_code=int(payload.get("status", 200))
            )
        statuses = payload.get("statuses")
        if statuses:
            attempt = int(request.headers.get("scheduler-attempt", "1"))
            return Response(status_code=int(statuses[min(attempt, len(statuses)) - 1]))
    return Response(status_code=200)


async def _generate(mib: int) -> AsyncIterator[bytes]:
    chunk = b"x" * (1024 * 1024)
    for _ in range(mib):
        yield chunk


@contextlib.asynccontextmanager
async def running_receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    app = Starlette(routes=[Route("/hook", _handle, methods=["POST", "PUT", "GET"])])
    app.state.receiver = receiver
    port = free_port()
    server = HostedServer(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    receiver.url = f"http://127.0.0.1:{port}/hook"
    try:
        yield receiver
    finally:
        server.should_exit = True
        await task
