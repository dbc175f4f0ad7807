"""The fault harness's own servers: an embedded Postgres (migrated) and NATS it can crash and
restart, and the settings its processes share."""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from nats.aio.client import Client as NATS

from app.config import Settings
from app.db.errors import DB_ERRORS
from app.db.migrations import migrate
from app.dev import EmbeddedNats, EmbeddedPostgres
from stack.databases import with_database
from tests.faults.hostile import HEAD_TIMEOUT
from tests.faults.report import Fault
from tests.processes import Process

# What Postgres logs when it starts on a data directory it was not shut down cleanly from.
CRASH_RECOVERY = re.compile(r"not properly shut down|automatic recovery in progress")
WORKER_SLOTS = 32  # per worker: few enough that the hostile tenant's hanging endpoints can fill them


# A line of the Postgres log that starts an entry (its timestamp and process id, the default
# log_line_prefix '%m [%p] '); the rest of an entry's lines are its continuation.
LOG_ENTRY = re.compile(r"^\d{4}-\d\d-\d\d [\d:.]+ \w+ \[(\d+)\] (\w+):")
EXPLAINS = ("DETAIL", "HINT", "CONTEXT", "STATEMENT")


def deadlocks(log: str) -> list[str]:
    """Each deadlock a Postgres log records, one string each: its error and the entries of the same
    process that explain it (which locks, in which function and statement)."""
    entries: list[tuple[str, str, list[str]]] = []  # (pid, level, lines)
    for line in log.splitlines():
        found = LOG_ENTRY.match(line)
        if found:
            entries.append((found[1], found[2], [line]))
        elif entries:
            entries[-1][2].append(line)
    out = []
    for i, (pid, level, lines) in enumerate(entries):
        if level == "ERROR" and "deadlock detected" in lines[0]:
            told = list(lines)
            for other_pid, other_level, more in entries[i + 1 :]:
                if other_pid != pid or other_level not in EXPLAINS:
                    break
                told += more
            out.append(" ".join(part.strip() for part in told))
    return out


class CrashablePostgres(EmbeddedPostgres):
    def deadlocks(self) -> list[str]:
        """The deadlocks its log records so far."""
        log = self.data_dir / "log"
        return deadlocks(log.read_text(errors="replace")) if log.exists() else []

    def crash_restart(self) -> bool:
        """`pg_ctl -m immediate`: the postmaster quits without a checkpoint, as on a crash, and the
        next start runs crash recovery. Returns whether the server's log says it did."""
        log = self.data_dir / "log"
        before = log.stat().st_size if log.exists() else 0
        self._pg_ctl(["-w", "-m", "immediate", "-l", str(log), "restart"])
        self._restarted = True
        with open(log, "rb") as f:
            f.seek(before)
            return bool(CRASH_RECOVERY.search(f.read().decode(errors="replace")))


class CrashableNats(EmbeddedNats):
    def crash_restart(self) -> None:
        """kill -9: no shutdown at all; the JetStream store (file storage) must survive it."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.start()


def stack_settings(database_url: str, nats_url: str) -> Settings:
    """Short leases, so a lost or frozen worker is rescued within seconds."""
    return Settings(
        database_url=database_url,
        nats_url=nats_url,
        admin_token="adm_" + secrets.token_urlsafe(24),
        allow_private_targets=True,  # the receiver is on 127.0.0.1
        lease_seconds=2.0,
        dispatch_lease_seconds=5.0,
        ack_wait_seconds=3.0,
        reap_interval_seconds=0.3,
        poll_interval_seconds=0.2,
        worker_grace_seconds=2.0,
        worker_concurrency=WORKER_SLOTS,
        # Callbacks retried quickly and generously: the victim's must all be delivered.
        callback_backoff_seconds=0.2,
        callback_poll_seconds=0.2,
        callback_timeout_seconds=5.0,
        callback_max_attempts=25,
        # Slow connections (hostile.hold_the_door) are cut soon, so they turn over within the phase.
        http_head_timeout_seconds=HEAD_TIMEOUT,
    )


@contextlib.asynccontextmanager
async def embedded(root: Path) -> AsyncIterator[tuple[CrashablePostgres, CrashableNats, str, str]]:
    """The harness's own Postgres (migrated) and NATS, stopped afterwards. Postgres's data directory
    is a temp dir of its own, not under `root`: pg_ctl runs as another user who must traverse its
    parents, and a pytest session started meanwhile (another checkout's) chmods pytest's shared base
    directory back to 0700. Its log is copied to root/logs at the end."""
    pg_dir = Path(tempfile.mkdtemp(prefix="scheduler-faults-pg-"))
    postgres, nats = CrashablePostgres(pg_dir / "data"), CrashableNats(root / "nats")
    try:
        admin_url = await asyncio.to_thread(postgres.start)
        nats_url = await asyncio.to_thread(nats.start)
        conn = await asyncpg.connect(admin_url)
        try:
            await conn.execute('CREATE DATABASE "scheduler"')
        finally:
            await conn.close()
        database_url = with_database(admin_url, "scheduler")
        await asyncio.to_thread(migrate, database_url)
        yield postgres, nats, database_url, nats_url
    finally:
        await asyncio.to_thread(nats.stop)
        await asyncio.to_thread(postgres.stop)
        with contextlib.suppress(OSError):
            shutil.copy(pg_dir / "data" / "log", root / "logs" / "postgres.log")
        shutil.rmtree(pg_dir, ignore_errors=True)


def stale_counters(metrics: str) -> dict[str, float]:
    """scheduler_stale_results_total by stage, from a /metrics page."""
    found = dict(re.findall(r'^scheduler_stale_results_total\{stage="(\w+)"\} (\S+)$', metrics, re.MULTILINE))
    return {stage: float(found.get(stage, 0)) for stage in ("start", "finish")}


def rss_mib(pid: int) -> float:
    """A process's resident memory, from /proc (0 when it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    return int(found.group(1)) / 1024 if found else 0.0


class Stack:
    """The processes under test, the servers under them, and the harness's own ways in."""

    def __init__(
        self,
        settings: Settings,
        spawn: Callable[..., Process],
        postgres: CrashablePostgres,
        nats: CrashableNats,
        pool: asyncpg.Pool,
        nc: NATS,
        started: float,
    ):
        self.settings = settings
        self.spawn_process = spawn
        self.postgres = postgres
        self.nats = nats
        self.pool = pool
        self.nc = nc
        self.started = started  # time.monotonic() when the harness began, servers' start included
        self.faults: list[Fault] = []
        self.roles: dict[str, dict[str, Process]] = {"api": {}, "engine": {}, "worker": {}}  # by owner
        self.names = {"api": 0, "engine": 0, "worker": 0}
        self.late_results_discarded = 0.0
        self.rss_peak = 0.0
        self.troubles: list[str] = []  # processes that died on their own or never became ready

    async def spawn(self, role: str) -> str:
        """Starts one more process of `role` and waits until it is ready; returns its lease owner."""
        self.names[role] += 1
        owner = f"{role}-{self.names[role]}"
        process = self.spawn_process(role, SCHEDULER_OWNER=owner)
        self.roles[role][owner] = process
        try:
            await process.wait_ready()
        except RuntimeError:  # a finding, not the harness's end: reported with the processes that died
            self.troubles.append(f"{owner} on :{process.port} never became ready ({process.log_path})")
        return owner

    def api_ports(self) -> list[int]:
        """The API processes still running (one that died on its own is skipped, not retried)."""
        return [p.port for p in self.roles["api"].values() if p.proc.poll() is None]

    async def request(self, method: str, path: str, *, retry: bool = True, **kwargs: Any) -> httpx.Response:
        """One request to a live API. The harness's own calls outlive the APIs it kills and those that
        die under the hostile tenant; `retry=False` for a request whose effect is being measured.
        Raises httpx.TransportError when no API answers."""
        failure: Exception = httpx.ConnectError("no API process is running")
        for _ in range(20 if retry else 1):
            for port in self.api_ports():
                try:
                    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as api:
                        return await api.request(method, path, **kwargs)
                except httpx.TransportError as exc:
                    failure = exc
                    if not retry:
                        raise
            await asyncio.sleep(0.5)
        raise failure

    def every_process(self) -> list[Process]:
        return [p for role in self.roles.values() for p in role.values()]

    def note(
        self,
        kind: str,
        detail: str,
        in_flight: int | None = None,
        problem: str = "",
        held: tuple[tuple[str, int], ...] = (),
        limited: int | None = None,
        parents: int | None = None,
    ) -> None:
        at = datetime.now(UTC).isoformat(timespec="milliseconds")
        fault = Fault(
            time.monotonic() - self.started, at, kind, detail, in_flight, problem, held, limited, parents
        )
        self.faults.append(fault)
        print(f"  {fault.render()}", flush=True)

    async def fetch(self, sql: str, *args: object) -> list[asyncpg.Record]:
        """The harness's own reads ride out the Postgres crash it causes."""
        for _ in range(120):
            try:
                rows: list[asyncpg.Record] = await self.pool.fetch(sql, *args)
                return rows
            except DB_ERRORS:
                await asyncio.sleep(0.5)
        rows = await self.pool.fetch(sql, *args)
        return rows

    async def sample_rss(self) -> None:
        while True:
            for p in self.roles["worker"].values():
                self.rss_peak = max(self.rss_peak, rss_mib(p.proc.pid))
            await asyncio.sleep(0.5)
