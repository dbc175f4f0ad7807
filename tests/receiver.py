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
from starlette.responses import Response
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
    if isinstance(payload, dict):
        if payload.get("sleep"):
            await asyncio.sleep(float(payload["sleep"]))
        if payload.get("redirect"):
            return Response(status_code=302, headers={"Location": str(payload["redirect"])})
        statuses = payload.get("statuses")
        if statuses:
            attempt = int(request.headers.get("scheduler-attempt", "1"))
            return Response(status_code=int(statuses[min(attempt, len(statuses)) - 1]))
    return Response(status_code=200)


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
