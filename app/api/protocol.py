"""The HTTP protocol the API serves with: uvicorn's httptools protocol with a request head of
bounded size and count (BoundedHttpToolsProtocol), then bounded time and connections
(GuardedHttpToolsProtocol: the front door, docs/deploy.md).

uvicorn's fast parser (httptools) has no header size limit, and it builds a header's value by
appending the pieces as they arrive: one unauthenticated 64 MiB header was read whole and stalled
every request on the event loop (the engine's too) for 8 s. This protocol counts the bytes of a
request's head before they reach the parser and answers 431 once they pass the limit, and 431 for
too many header lines; everything else is httptools' normal path, unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from app.config import Settings
from app.errors import PROBLEM_JSON, problem

log = logging.getLogger(__name__)


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
        self._answer_and_close(431, "header_fields_too_large", msg, "headers")

    def _answer_and_close(self, status: int, code: str, msg: str, field: str | None = None) -> None:
        """A problem answer written straight to the connection, which then closes; nothing more of
        it is read."""
        self._refused = True
        body = orjson.dumps(problem(status, code, msg, field))
        self.transport.write(
            b"".join(
                [
                    STATUS_LINE[status],
                    b"content-type: " + PROBLEM_JSON.encode() + b"\r\n",
                    b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                    b"connection: close\r\n\r\n",
                    body,
                ]
            )
        )
        self.transport.close()


# A fresh connection's or a request's head, and a request's body, arriving slower than this are cut.
# The health probes are answered past the concurrency limit: the process is alive, only busy.
PROBE_PATHS = frozenset({b"/healthz", b"/readyz"})
# File descriptors kept for everything but client connections: Postgres and NATS connections, the
# engine's, logs, a probe's connection.
FD_RESERVE = 256


@dataclass
class FrontDoor:
    """How long a request may take to arrive and how many connections one API server keeps: one
    per server process, shared by its connections (it counts them per client address)."""

    head_timeout: float  # a fresh connection, or a request's first byte, to the end of the head
    body_timeout: float  # a body's allowance, longer by a second per `body_min_rate` bytes received
    body_min_rate: int
    open_limit: int  # connections open at once; beyond it, a new one is answered 503 and closed
    per_client: int  # connections of one peer address (0: no bound)
    by_client: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, settings: Settings) -> FrontDoor:
        return cls(
            settings.http_head_timeout_seconds,
            settings.http_body_timeout_seconds,
            settings.http_body_min_rate,
            open_limit(settings.http_max_connections),
            settings.http_max_connections_per_client,
        )


def open_limit(max_connections: int) -> int:
    """Twice the concurrency limit, so requests past it are answered 503 rather than refused, but
    never so many that client connections take the descriptors the process needs for the rest: a
    flood of half-sent requests took all 20,000 of them, and every request was reset."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = 2 * max_connections
    if soft != resource.RLIM_INFINITY:
        limit = min(limit, soft - FD_RESERVE)
    return max(1, limit)


class GuardedHttpToolsProtocol(BoundedHttpToolsProtocol):
    """A request's head must arrive within `head_timeout` (from the connection's opening, or from
    its first byte on a kept-alive connection), its body at a minimum rate (Apache's
    mod_reqtimeout: `body_timeout` plus a second per `body_min_rate` bytes), and a server keeps at
    most `open_limit` connections, `per_client` of one address. uvicorn bounds none of these: its
    keep-alive timeout covers only the idle time between requests, and `limit_concurrency` answers
    503 only once a request's head has arrived. 3,000 connections sending a byte every 10 s stayed
    open, and 21,000 half-sent requests took every file descriptor of the process."""

    def __init__(self, config: Config, *args: Any, door: FrontDoor, **kwargs: Any):
        super().__init__(config, *args, **kwargs)
        self.door = door
        self._limit_concurrency = self.limit_concurrency
        self._timer: asyncio.TimerHandle | None = None
        self._peer: str | None = None  # counted in door.by_client
        self._head_begun = False  # a request's first byte arrived, its head's end not yet
        self._in_body = False
        self._body_since = 0.0
        self._body_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        door, peer = self.door, self.client[0] if self.client else None
        if len(self.connections) > door.open_limit:
            self._answer_and_close(503, "http_error", "the server has too many connections open")
            return
        if peer is not None and door.per_client:
            if door.by_client.get(peer, 0) >= door.per_client:
                self._answer_and_close(503, "http_error", "too many connections from this address")
                return
            door.by_client[peer] = door.by_client.get(peer, 0) + 1
            self._peer = peer
        self._arm(door.head_timeout, self._head_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._peer is not None:
            left = self.door.by_client[self._peer] - 1
            if left:
                self.door.by_client[self._peer] = left
            else:
                del self.door.by_client[self._peer]
            self._peer = None
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_begun = True
        if self._timer is None:  # a kept-alive connection's next request; a fresh one's is running
            self._arm(self.door.head_timeout, self._head_timed_out)

    def on_headers_complete(self) -> None:
        self._disarm()
        self._head_begun = False
        probe = self.url.split(b"?", 1)[0] in PROBE_PATHS
        self.limit_concurrency = None if probe else self._limit_concurrency
        super().on_headers_complete()
        if self._refused or self.transport.is_closing():
            return
        if any(
            (name == b"content-length" and value not in (b"0", b"")) or name == b"transfer-encoding"
            for name, value in self.headers
        ):
            self._in_body, self._body_since, self._body_bytes = True, self.loop.time(), 0
            self._arm(self.door.body_timeout, self._check_body)

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._in_body = False
        self._disarm()
        super().on_message_complete()

    def handle_websocket_upgrade(self) -> None:
        self._disarm()  # the connection is another protocol's from here
        super().handle_websocket_upgrade()

    def _arm(self, delay: float, callback: Callable[[], None]) -> None:
        self._disarm()
        self._timer = self.loop.call_later(delay, callback)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _head_timed_out(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        if self._head_begun and (self.cycle is None or self.cycle.response_complete):
            msg = f"the request's head did not arrive within {self.door.head_timeout:g} s"
            self._answer_and_close(408, "http_error", msg)
        else:  # nothing sent (closed as an idle one is), or a head behind a response being written
            self.transport.close()

    def _check_body(self) -> None:
        self._timer = None
        if not self._in_body or self.transport.is_closing():
            return
        now, door = self.loop.time(), self.door
        # The app has not taken what arrived, or the client waits for its 100 Continue: it cannot send.
        if self.flow.read_paused or (self.cycle is not None and self.cycle.waiting_for_100_continue):
            self._body_since, self._body_bytes = now, 0
            self._arm(door.body_timeout, self._check_body)
            return
        deadline = self._body_since + door.body_timeout + self._body_bytes / door.body_min_rate
        if now < deadline:
            self._arm(deadline - now, self._check_body)
            return
        log.info("closing a connection whose request body arrives slower than %d B/s", door.body_min_rate)
        self.transport.close()  # the app's next receive() reads a disconnect
