"""A local webhook receiver for end-to-end tests: records every call, answers as scripted.

Scripted behaviour comes from the JSON payload (a body that is not a JSON object answers 200):
- {"statuses": [500, 500, 200]} answers by attempt number;
- {"sleep": s} holds the request open for s seconds first; {"redirect": url} answers 302 to url;
- {"k": key} counts the attempt among the requests of that key in flight at the receiver: from its
  arrival until its response is sent, or until the caller's connection closes (a killed worker's
  request stops counting when the kernel closes its socket, not when the scheduler frees its slot);
  each call records how many of its key were in flight with it (`Call.concurrent`), for the fault
  harness's concurrency-limit check;
- hostile answers, for the fault harness and the isolation tests:
  {"hang": s} never answers: it holds the request until the caller gives up (its timeout) or s
  seconds pass, and records whether the caller abandoned it;
  {"nul": true} answers 500 with NUL bytes in the body;
  {"huge": n, "status": code} streams an n-byte body (status 500 unless given);
- {"answer": {"status": s, "body": text, "body_hex": hex, "content_type": t, "retry_after": v}}
  answers exactly that (body_hex for bytes that are not text; the attempt's own entry, by attempt
  number, when it is a list).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from app.dev import free_port
from app.telemetry.ops_server import HostedServer

NUL_BODY = b"bad\x00body\x00" + b"\x00" * 64
CHUNK = 64 * 1024
OVERLAP_KEY = "receiver.overlap_key"  # in the ASGI scope: the key a request is counted under


@dataclass
class Call:
    headers: dict[str, str]
    body: bytes
    # When it arrived and ended (time.monotonic()); `behaviour` names a hostile answer ("hang",
    # "nul", "huge") or is empty; `abandoned`: the caller hung up before any answer (a timeout, or
    # a killed caller) while a hang or a sleep held the request.
    started: float = 0.0
    ended: float | None = None
    behaviour: str = ""
    abandoned: bool = False
    # {"k": key} in the payload: the key, and how many requests of it were in flight at the receiver
    # at this one's arrival, itself included (the most at once it saw).
    key: str | None = None
    concurrent: int = 0

    @property
    def is_callback(self) -> bool:
        """A completion callback (its body is the finished run), not a run's attempt."""
        return "scheduler-callback-attempt" in self.headers

    @property
    def envelope(self) -> Any:
        """The signed body of a target with `"body": "envelope"`, or of a callback: {"type",
        "timestamp", "data": {"run_id", ..., "payload"}}."""
        return orjson.loads(self.body)

    @property
    def payload(self) -> Any:
        """The run's payload: the body itself, or the one inside an envelope."""
        return payload_of(orjson.loads(self.body))


@dataclass
class Receiver:
    url: str = ""
    calls: list[Call] = field(default_factory=list)
    in_flight: Counter[str] = field(default_factory=Counter)  # key -> requests of it in flight now

    def arrive(self, call: Call, key: str) -> None:
        self.in_flight[key] += 1
        call.key, call.concurrent = key, self.in_flight[key]

    def depart(self, key: str) -> None:
        self.in_flight[key] -= 1

    def for_run(self, run_id: str) -> list[Call]:
        """The run's attempts."""
        return [c for c in self.calls if c.headers.get("scheduler-run-id") == run_id and not c.is_callback]

    def callbacks_for(self, run_id: str) -> list[Call]:
        return [c for c in self.calls if c.headers.get("scheduler-run-id") == run_id and c.is_callback]


ENVELOPE_TYPES = ("run.attempt", "run.completed")  # an attempt's envelope, a callback's


def payload_of(body: Any) -> Any:
    """The run's payload in a parsed body: the body itself (a target's default), or `data.payload`
    of an envelope (a target with `"body": "envelope"`, a callback). A payload that looks like an
    envelope would be read as one; the tests send none."""
    if isinstance(body, dict) and body.get("type") in ENVELOPE_TYPES and isinstance(body.get("data"), dict):
        return body["data"].get("payload")
    return body


def _script(body: bytes) -> dict[str, Any]:
    """The payload's instructions; a body that is not a JSON object (or nests beyond what the parser
    takes: a poison payload) has none."""
    try:
        payload = payload_of(orjson.loads(body)) if body else {}
    except orjson.JSONDecodeError:
        return {}
    return payload if isinstance(payload, dict) else {}


async def _hang(request: Request, call: Call, seconds: float) -> Response:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await request.is_disconnected():
            call.abandoned = True
            break
        await asyncio.sleep(0.05)
    return Response(status_code=504)


def _huge(call: Call, size: int, status: int) -> Response:
    async def chunks() -> AsyncIterator[bytes]:
        left = size
        while left > 0:
            yield b"x" * min(CHUNK, left)
            left -= CHUNK
        call.ended = time.monotonic()

    return StreamingResponse(chunks(), status_code=status, media_type="text/plain")


def _answer(answer: Any, attempt: int) -> Response:
    if isinstance(answer, list):
        answer = answer[min(attempt, len(answer)) - 1]
    body = bytes.fromhex(answer["body_hex"]) if "body_hex" in answer else str(answer.get("body", "")).encode()
    headers = {"Retry-After": str(answer["retry_after"])} if "retry_after" in answer else {}
    return Response(
        body,
        status_code=int(answer.get("status", 200)),
        media_type=answer.get("content_type"),
        headers=headers,
    )


async def _handle(request: Request) -> Response:
    receiver: Receiver = request.app.state.receiver
    started = time.monotonic()
    try:
        body = await request.body()
    except ClientDisconnect:  # the caller died mid-request (a fault test): the call never arrived
        return Response(status_code=499)
    call = Call(dict(request.headers), body, started=started)
    receiver.calls.append(call)
    script = _script(body)
    if "k" in script and not call.is_callback:
        receiver.arrive(call, str(script["k"]))
        # Counted off by _CountOverlap once the response is sent (or the send failed).
        request.scope[OVERLAP_KEY] = call.key
    # Scripted behaviour from the run's payload: {"statuses": [500, 500, 200]} answers by attempt
    # number; {"sleep": s} holds the request open for s seconds first; {"redirect": url} answers 302.
    # Hostile answers: {"hang": s} never answers within s (a timeout at the caller); {"nul": true} a
    # 500 whose body holds NULs; {"poison": status} a body with a NUL and invalid UTF-8; {"huge": n,
    # "status": s} n bytes generated on the fly; {"stream_mib": n, "status": s} the same in MiB.
    try:
        if script.get("hang"):
            call.behaviour = "hang"
            return await _hang(request, call, float(script["hang"]))
        if script.get("nul"):
            call.behaviour = "nul"
            return Response(NUL_BODY, status_code=500, media_type="text/plain")
        if script.get("poison"):
            call.behaviour = "nul"
            return Response(b"bad\x00body \xff\xfe \xed\xa0\x80", status_code=int(script["poison"]))
        if script.get("answer"):
            return _answer(script["answer"], int(request.headers.get("scheduler-attempt", "1")))
        if script.get("huge") or script.get("stream_mib"):
            call.behaviour = "huge"
            size = int(script["huge"]) if script.get("huge") else int(script["stream_mib"]) * 1024 * 1024
            return _huge(call, size, int(script.get("status", 500 if script.get("huge") else 200)))
        if script.get("sleep"):
            # In steps, so a caller that gave up (a timeout, a stopped worker) frees the handler.
            until = time.monotonic() + float(script["sleep"])
            while time.monotonic() < until:
                if await request.is_disconnected():
                    call.abandoned = True  # the caller hung up (timed out, or was killed) first
                    break
                await asyncio.sleep(min(0.1, until - time.monotonic()))
        if script.get("redirect"):
            return Response(status_code=302, headers={"Location": str(script["redirect"])})
        statuses = script.get("statuses")
        if statuses:
            # A callback's own attempts count for it, a run's for the run.
            attempt = int(
                request.headers.get(
                    "scheduler-callback-attempt", request.headers.get("scheduler-attempt", "1")
                )
            )
            return Response(status_code=int(statuses[min(attempt, len(statuses)) - 1]))
        return Response(status_code=200)
    finally:
        if call.behaviour != "huge":
            call.ended = time.monotonic()


class _CountOverlap:
    """Ends a keyed request's count after the whole ASGI exchange, so after its last byte was handed
    to the server (the handler's `finally` runs before the response is sent). A caller that died
    mid-request ends it too: the sleep polls for the disconnect, and a send to a closed connection
    returns or raises into this `finally`."""

    def __init__(self, app: ASGIApp, receiver: Receiver):
        self.app = app
        self.receiver = receiver

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            if (key := scope.get(OVERLAP_KEY)) is not None:
                self.receiver.depart(key)


@contextlib.asynccontextmanager
async def running_receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    app = Starlette(routes=[Route("/hook", _handle, methods=["POST", "PUT", "GET"])])
    app.state.receiver = receiver
    port = free_port()
    server = HostedServer(
        uvicorn.Config(_CountOverlap(app, receiver), host="127.0.0.1", port=port, log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    receiver.url = f"http://127.0.0.1:{port}/hook"
    try:
        yield receiver
    finally:
        server.should_exit = True
        await task
