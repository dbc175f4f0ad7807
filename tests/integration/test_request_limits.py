"""Request limits of a real `scheduler api` process, probed with a raw socket (issue 12, item 7):
a bounded request head (size and count: 431), and bodies refused from their Content-Length before
they are read."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from app.config import Settings
from tests.processes import Process, processes


@pytest_asyncio.fixture(loop_scope="session")
async def server(settings: Settings, tmp_path: Path) -> AsyncIterator[Process]:
    async with processes(settings, tmp_path) as spawn:
        api = spawn("api", SCHEDULER_ENGINE="off")
        await api.wait_ready()
        yield api


def exchange(port: int, request: bytes, timeout: float = 10) -> bytes:
    """Send the request and read until the server closes or answers one response."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
            if b"\r\n\r\n" in answer and b"connection: close" not in answer.lower():
                break
        return answer


def read_response(sock: socket.socket) -> bytes:
    """One whole response on a keep-alive connection: its head, then Content-Length bytes of body
    (one recv may end between the two, and the next would read the last response's body)."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {answer!r}"
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def healthz(port: int) -> tuple[int, float]:
    started = time.perf_counter()
    answer = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    return status(answer), time.perf_counter() - started


async def test_a_request_head_over_the_limit_is_431(server: Process) -> None:
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n"
    assert status(await asyncio.to_thread(exchange, server.port, head)) == 431
    # A long URL is part of the head too.
    head = b"GET /healthz?" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    assert status(await asyncio.to_thread(exchange, server.port, head)) == 431
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(150))
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n"
    assert status(await asyncio.to_thread(exchange, server.port, head)) == 431
    # The normal path is untouched, keep-alive included.
    ok = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Some: " + b"a" * 4000 + b"\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        for _ in range(3):
            sock.sendall(ok)
            assert status(read_response(sock)) == 200


async def test_a_large_body_in_the_same_read_as_its_head_is_not_counted_as_head(server: Process) -> None:
    # A 60 kB POST arrives in one read with its head: only the head counts against the 16 KiB
    # bound (it was answered 431). Unauthenticated, so the answer is 401, from past the protocol.
    body = b'{"job": "hello", "payload": {"pad": "' + b"a" * 60_000 + b'"}}'
    request = (
        b"POST /tenants/acme/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
    ) + body
    assert status(await asyncio.to_thread(exchange, server.port, request)) == 401
    # The blank line split across two reads is still the end of the head.
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        head = request[: request.index(b"\r\n\r\n") + 2]
        sock.sendall(head)
        time.sleep(0.2)
        sock.sendall(request[len(head) :])
        assert status(read_response(sock)) == 401


def send_huge_header(port: int, total: int) -> int:
    """Streams a header of `total` bytes; returns how many were accepted before the server cut it."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ")
            chunk = b"a" * 65536
            while sent < total:
                sock.sendall(chunk)
                sent += len(chunk)
            sock.sendall(b"\r\n\r\n")
            sock.recv(100)
        except (BrokenPipeError, ConnectionResetError):
            pass
    return sent


async def test_a_64_mib_header_is_cut_off_and_stalls_no_one(server: Process) -> None:
    total = 64 * 1024 * 1024
    huge = asyncio.create_task(asyncio.to_thread(send_huge_header, server.port, total))
    worst = 0.0
    while not huge.done():
        code, took = await asyncio.to_thread(healthz, server.port)
        assert code == 200
        worst = max(worst, took)
    accepted = await huge
    # Cut after the limit and what the kernel's buffers held, not read whole (it used to be).
    assert accepted < 16 * 1024 * 1024, accepted
    assert worst < 1.0, worst


async def test_an_oversized_body_is_refused_from_its_content_length(server: Process) -> None:
    # Declared, never sent: the answer comes before any body byte is read.
    for path, length in ((b"/tenants/acme/runs", 1_000_000), (b"/tenants/acme/runs/batch", 17 * 1024 * 1024)):
        head = (
            b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % length
        )
        answer = await asyncio.to_thread(exchange, server.port, head, 5)
        assert status(answer) == 413, answer


# httpx's idle expiry (keepalive_expiry), which most client pools share.
CLIENT_IDLE_EXPIRY = 5.0


async def test_an_idle_connection_is_left_for_the_client_to_close(server: Process) -> None:
    """A client reuses a keep-alive connection it has kept idle for up to its own expiry. A server
    that closes it first (uvicorn's default: after 5 s, as httpx's) races that reuse: under load, one
    30 s run in five of 32 httpx clients saw a POST reset unanswered. Ours keeps it longer."""

    def reuse_after_idling() -> bytes:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert status(read_response(sock)) == 200
            time.sleep(CLIENT_IDLE_EXPIRY + 1)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            return read_response(sock)  # asserts the connection is still open

    assert status(await asyncio.to_thread(reuse_after_idling)) == 200
