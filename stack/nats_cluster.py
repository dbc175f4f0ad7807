"""A three-server NATS cluster with JetStream on loopback, from the same nats-server binary as the
single embedded server (app.dev.EmbeddedNats): free ports, routes between all of them, a store
directory each under one root. Servers are started, killed and stopped by their PID; every wait is
bounded."""

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

CLUSTER_NAME = "scheduler-test"


class ClusterServer(EmbeddedNats):
    """One server of the cluster: its client port, its route port, and routes to every server."""

    def __init__(self, data_dir: Path, server_name: str, cluster_port: int, routes: list[str]):
        super().__init__(data_dir)
        self.server_name = server_name
        self.cluster_port = cluster_port
        self.routes = routes
        self.name = f"nats-server-{server_name}"

    def command(self) -> list[str]:
        return [
            *super().command(),
            *("--name", self.server_name, "--cluster_name", CLUSTER_NAME),
            *("--cluster", f"nats://127.0.0.1:{self.cluster_port}", "--routes", ",".join(self.routes)),
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


class NatsCluster:
    """`size` servers named n1, n2, … (their JetStream server names, as stream_info's
    cluster.leader reports them), each with its store in `root/<name>`."""

    def __init__(self, root: Path, size: int = 3):
        cluster_ports = [free_port() for _ in range(size)]
        routes = [f"nats://127.0.0.1:{p}" for p in cluster_ports]
        self.servers = {
            f"n{i + 1}": ClusterServer(root / f"n{i + 1}", f"n{i + 1}", port, routes)
            for i, port in enumerate(cluster_ports)
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
async def running_cluster(size: int = 3, timeout: float = 30.0) -> AsyncIterator[NatsCluster]:
    """A started cluster whose JetStream answers; stopped (and its stores removed) afterwards."""
    root = Path(tempfile.mkdtemp(prefix="scheduler-nats-cluster-"))
    cluster = NatsCluster(root, size)
    try:
        await asyncio.to_thread(cluster.start)
        await cluster.wait_ready(timeout)
        yield cluster
    finally:
        await asyncio.to_thread(cluster.stop)
        shutil.rmtree(root, ignore_errors=True)
