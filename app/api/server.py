"""The HTTP server's options (app/api/protocol.py is its protocol, with the head's, time's and
connections' bounds), a request body of bounded size and JSON type (BodyLimit), and every request's
id (RequestId)."""

from __future__ import annotations

import functools
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.problems import problem_response
from app.api.protocol import FrontDoor, GuardedHttpToolsProtocol
from app.config import Settings
from app.errors import PayloadTooLarge, UnsupportedMediaType
from app.services.audit import REQUEST_ID, new_request_id


def server_options(settings: Settings) -> dict[str, Any]:
    """uvicorn options every API server of ours takes (`scheduler api`, `scheduler dev`, tests)."""
    options: dict[str, Any] = {
        # A class and its arguments: it pickles, so uvicorn's worker processes build their own.
        "http": functools.partial(GuardedHttpToolsProtocol, door=FrontDoor.of(settings)),
        "h11_max_incomplete_event_size": settings.max_header_bytes,
        "timeout_keep_alive": settings.http_keep_alive_seconds,
        "limit_concurrency": settings.http_max_connections,
    }
    if settings.forwarded_allow_ips is not None:
        options["forwarded_allow_ips"] = settings.forwarded_allow_ips
    return options


REQUEST_ID_HEADER = b"x-request-id"
REQUEST_ID_KEY = "scheduler.request_id"  # where a route finds it in the ASGI scope


class RequestId:
    """Every request has an id: the caller's X-Request-ID when it is 1 to 128 of A-Z a-z 0-9 and
    `._:/+=-`, else a new one. It is answered in X-Request-ID and recorded with the audit events the
    request writes (app.services.audit), so a caller can find what its request changed."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((v for k, v in scope["headers"] if k == REQUEST_ID_HEADER), b"")
        text = given.decode("latin-1")
        request_id = text if REQUEST_ID.fullmatch(text) else new_request_id()
        scope[REQUEST_ID_KEY] = request_id
        header = (REQUEST_ID_HEADER, request_id.encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        await self.app(scope, receive, send_with_id)


class BodyLimit:
    """Refuses request bodies over the limit, declared or streamed, before a route reads them.

    A batch may carry `limit` bytes; any other body far less (`single_limit`: a run or a job is one
    payload plus a few fields), so a flood of oversized single POSTs is refused from its
    Content-Length instead of being read and parsed. A body declared as something other than JSON
    is refused with 415 naming the header; a body with no Content-Type is read as JSON."""

    def __init__(self, app: ASGIApp, limit: int, single_limit: int):
        self.app = app
        self.limit = limit
        self.single_limit = min(single_limit, limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit if scope["path"].endswith("/batch") else self.single_limit
        declared: int | None = None
        content_type = b""
        chunked = False
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit():
                declared = int(value)
            elif name == b"content-type":
                content_type = value
            elif name == b"transfer-encoding":
                chunked = True
        if declared is not None and declared > limit:
            await problem_response(413, PayloadTooLarge.code, f"request body over {limit} bytes", "body")(
                scope, receive, send
            )
            return
        # Only a body is judged by its type: a GET that sends a Content-Type has none to misread.
        if (
            (declared or chunked)
            and content_type
            and not _is_json(content_type)
            and not _is_dashboard_form(scope["path"], content_type)
        ):
            message = "the body must be JSON: send Content-Type: application/json, or no Content-Type"
            await problem_response(415, UnsupportedMediaType.code, message, "content-type")(
                scope, receive, send
            )
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise PayloadTooLarge(f"request body over {limit} bytes", field="body")
            return message

        await self.app(scope, limited, send)


def _is_json(content_type: bytes) -> bool:
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (media.startswith(b"application/") and media.endswith(b"+json"))


def _is_dashboard_form(path: str, content_type: bytes) -> bool:
    """The dashboard's own HTML forms (app/ui) post url-encoded fields; nothing else may."""
    media = content_type.split(b";", 1)[0].strip().lower()
    return path.startswith("/ui/") and media == b"application/x-www-form-urlencoded"
