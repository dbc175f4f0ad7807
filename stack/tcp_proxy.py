"""A TCP proxy on loopback that a test can cut and heal: a network partition between two servers
without root or network namespaces. It accepts, connects upstream and pipes bytes both ways; `cut()`
drops every connection at once (no FIN handshake wait: the sockets are aborted) and closes new ones
as soon as they are accepted, until `heal()`."""

from __future__ import annotations

import asyncio
import contextlib

from app.dev import free_port

CHUNK = 64 * 1024


class TcpProxy:
    """127.0.0.1:`port` forwarded to 127.0.0.1:`upstream_port`, in the running event loop."""

    def __init__(self, upstream_port: int, port: int | None = None):
        self.upstream_port = upstream_port
        self.port = port or free_port()
        self.cut_off = False
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
            self._server = None

    def cut(self) -> None:
        """Every connection through the proxy dropped, and new ones closed once accepted."""
        self.cut_off = True
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def heal(self) -> None:
        self.cut_off = False

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if self.cut_off:
            client_writer.transport.abort()
            return
        try:
            upstream_reader, upstream_writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self.upstream_port), 5
            )
        except (OSError, TimeoutError):
            client_writer.transport.abort()
            return
        if self.cut_off:  # cut while connecting
            client_writer.transport.abort()
            upstream_writer.transport.abort()
            return
        pair = (client_writer, upstream_writer)
        self._writers.update(pair)
        try:
            await asyncio.gather(
                self._pipe(client_reader, upstream_writer), self._pipe(upstream_reader, client_writer)
            )
        finally:
            for writer in pair:
                self._writers.discard(writer)
                writer.transport.abort()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Until either side ends; then the other side is aborted too, so neither half stays open."""
        try:
            while data := await reader.read(CHUNK):
                writer.write(data)
                await writer.drain()
        except (OSError, ConnectionError):
            pass
        finally:
            writer.transport.abort()
