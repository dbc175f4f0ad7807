"""The HTTP server's own limits: a request head (request line and headers) of bounded size and
count (BoundedHttpToolsProtocol), and a body of bounded size and JSON type (BodyLimit).

uvicorn's fast parser (httptools) has no header size limit, and it builds a header's value by
appending the pieces as they arrive: one unauthenticated 64 MiB header was read whole and stalled
every request on the event loop (the engine's too) for 8 s. This protocol counts the bytes of a
request's head before they reach the parser and answers 431 once they pass the limit, and 431 for
too many header lines; everything else is httptools' normal path, unchanged.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from app.api.problems import problem_response
from app.config import Settings
from app.errors import PROBLEM_JSON, PayloadTooLarge, UnsupportedMediaType, problem

DEFAULT_MAX_HEAD_BYTES = 16 * 1024  # h11's and Node's default


class _TooManyHeaders(Exception):
    pass


# Apache's LimitRequestFields default; a client of this API sends about ten.
MAX_HEADERS = 100


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a bounded request head. The byte limit is uvicorn's own
    `h11_max_incomplete_event_size` (what bounds the head on the h11 path), so one setting serves
    both parsers; it travels in uvicorn's Config, which also reaches worker processes."""

    max_headers = MAX_HEADERS

    def __init__(self, config: Config, *args: Any, **kwargs: Any):
        super().__init__(config, *args, **kwargs)
        self.max_head_bytes = config.h11_max_incomplete_event_size or DEFAULT_MAX_HEAD_BYTES
        self._in_head = True  # between a request's first byte and the end of its headers
        self._head_bytes = 0
        self._head_tail = b""
        self._header_count = 0
        self._refused = False

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._in_head:
            # Only the head counts: a chunk that also carries the start of the body (a 60 kB POST
            # arrives in one read) counts up to the blank line that ends the head. The last bytes of
            # the previous chunk are kept so a blank line split across two reads is still found.
            seen = self._head_tail + data
            end = seen.find(b"\r\n\r\n")
            self._head_bytes += len(data) if end < 0 else max(0, end + 4 - len(self._head_tail))
            self._head_tail = seen[-3:]
            if self._head_bytes > self.max_head_bytes:
                self._refuse(f"request head over {self.max_head_bytes} bytes")
                return
        super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        # httptools reports our own callback's exception as a parse error, answered 400 here.
        if self._header_count > self.max_headers:
            self._refuse(f"more than {self.max_headers} header lines")
        else:
            super().send_400_response(msg)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # The byte count is not reset here but when the previous head ended: the chunk that started
        # this message has been counted already.
        self._in_head, self._header_count = True, 0

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.max_headers:
            raise _TooManyHeaders
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head, self._head_bytes, self._head_tail = False, 0, b""
        super().on_headers_complete()

    def _refuse(self, msg: str) -> None:
        self._refused = True
        body = orjson.dumps(problem(431, "header_fields_too_large", msg, "headers"))
        self.transport.write(
            b"".join(
                [
                    STATUS_LINE[431],
                    b"content-type: " + PROBLEM_JSON.encode() + b"\r\n",
                    b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                    b"connection: close\r\n\r\n",
                    body,
                ]
            )
        )
        self.transport.close()


def server_options(settings: Settings) -> dict[str, Any]:
    """uvicorn options every API server of ours takes (`scheduler api`, `scheduler dev`, tests)."""
    return {
        "http": BoundedHttpToolsProtocol,
        "h11_max_incomplete_event_size": settings.max_header_bytes,
        "timeout_keep_alive": settings.http_keep_alive_seconds,
    }


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
