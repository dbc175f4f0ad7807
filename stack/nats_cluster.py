"""A three-server NATS cluster with JetStream on loopback, from the same nats-server binary as the
single embedded server (app.dev.EmbeddedNats): free ports, routes between all of them, a store
directory each under one root. Servers are started, killed, paused and stopped by their PID; with
`partitionable`, every route between two servers runs through a TCP proxy of its own
(stack/tcp_proxy.py), so that a test can cut one server off from the others while its clients still
reach it. Every wait is bounded."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import nats
from nats.errors import Error as NatsError

from app.dev import EmbeddedNats, free_port
from stack.tcp_proxy import TcpProxy

CLUSTER_NAME = "scheduler-test"


class ClusterServer(EmbeddedNats):
    """One server of the cluster: its client port, its route port, and routes to every server."""

    def __init__(
        self,
        data_dir: Path,
        server_name: str,
        cluster_port: int,
        routes: list[str],
        cluster_advertise: str | None = None,
    ):
        super().__init__(data_dir)
        self.server_name = server_name
        self.cluster_port = cluster_port
        self.routes = routes
        self.cluster_advertise = cluster_advertise
        self.name = f"nats-server-{server_name}"

    def command(self) -> list[str]:
        advertise = ("--cluster_advertise", self.cluster_advertise) if self.cluster_advertise else ()
        return [
            *super().command(),
            *("--name", self.server_name, "--cluster_name", CLUSTER_NAME),
            *("--cluster", f"nats://127.0.0.1:{self.cluster_port}", "--routes", ",".join(self.routes)),
            *advertise,
        ]

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """kill -9: no shutdown, no leadership handed over; its store stays as the kill left it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def pause(self) -> None:
        """SIGSTOP: a server frozen with its sockets open (a stalled VM, a long GC, a stuck disk)."""
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.resume()  # a stopped process cannot act on SIGTERM
        super().stop()


class NatsCluster:
    """`size` servers named n1, n2, … (their JetStream server names, as stream_info's
    cluster.leader reports them), each with its store in `root/<name>`."""

    def __init__(self, root: Path, size: int = 3, partitionable: bool = False):
        names = [f"n{i + 1}" for i in range(size)]
        cluster_ports = {name: free_port() for name in names}
        # (from, to): the proxy `from`'s route to `to` goes through; none unless partitionable.
        self.proxies: dict[tuple[str, str], TcpProxy] = {}
        if partitionable:
            self.proxies = {(a, b): TcpProxy(cluster_ports[b]) for a in names for b in names if a != b}

        def routes(name: str) -> list[str]:
            if not partitionable:
                return [f"nats://127.0.0.1:{port}" for port in cluster_ports.values()]
            return [self.proxies[(name, other)].url for other in names if other != name]

        # Servers tell each other the route address others may reach them at, and connect to the
        # servers they hear of that way: advertised as a closed port, so that every route is one
        # of the proxied ones and a cut cannot be bypassed.
        advertise = f"127.0.0.1:{free_port()}" if partitionable else None
        self.servers = {
            name: ClusterServer(root / name, name, cluster_ports[name], routes(name), advertise)
            for name in names
        }

    @property
    def url(self) -> str:
        """The cluster's NATS_URL: every server, separated by commas."""
        return ",".join(server.url() for server in self.servers.values())

    def start(self) -> str:
        try:
            for server in self.servers.values():
                server.start()
        except BaseException:
            self.stop()
            raise
        return self.url

    def stop(self) -> None:
        for server in self.servers.values():
            with contextlib.suppress(Exception):
                server.stop()

    def kill(self, server_name: str) -> ClusterServer:
        server = self.servers[server_name]
        server.kill()
        return server

    def partition(self, server_name: str) -> None:
        """Cut `server_name` off from every other server (routes both ways); clients still reach it."""
        assert self.proxies, "a partitionable cluster"
        for pair, proxy in self.proxies.items():
            if server_name in pair:
                proxy.cut()

    def heal(self) -> None:
        for proxy in self.proxies.values():
            proxy.heal()

    async def wait_ready(self, timeout: float = 30.0) -> None:
        """Until JetStream answers: the servers found each other and elected a meta leader (a stream
        cannot be created before). TimeoutError past `timeout`."""
        nc = await nats.connect(servers=self.url.split(","), connect_timeout=2, max_reconnect_attempts=-1)
        try:
            js = nc.jetstream()
            async with asyncio.timeout(timeout):
                while True:
                    with contextlib.suppress(NatsError, TimeoutError):
                        info = await js.account_info()
                        if info is not None:
                            return
                    await asyncio.sleep(0.2)
        finally:
            await nc.close()


@contextlib.asynccontextmanager
async def running_cluster(
    size: int = 3, timeout: float = 30.0, partitionable: bool = False
) -> AsyncIterator[NatsCluster]:
    """A started cluster whose JetStream answers; stopped (and its stores removed) afterwards. Its
    route proxies, if `partitionable`, run in the calling event loop."""
    root = Path(tempfile.mkdtemp(prefix="scheduler-nats-cluster-"))
    cluster = NatsCluster(root, size, partitionable)
    try:
        for proxy in cluster.proxies.values():
            await proxy.start()
        await asyncio.to_thread(cluster.start)
        await cluster.wait_ready(timeout)
        yield cluster
    finally:
        await asyncio.to_thread(cluster.stop)
        for proxy in cluster.proxies.values():
            await proxy.close()
        shutil.rmtree(root, ignore_errors=True)
