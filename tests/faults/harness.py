"""Fault harness: drains webhook runs through two API/engine processes and two workers while it kills,
restarts and freezes the parts, then checks the run state machine's promises (DESIGN.md §3) in SQL
and at the webhook receiver.

    python -m tests.faults.harness --runs 2000 --duration 120     # long mode, by hand
    pytest tests/faults/test_faults.py                            # short mode, in CI

It owns its Postgres and NATS (embedded, in a temp dir), since it restarts them. Each fault is
timestamped in the report:

- kill -9 an API process (its engine inside) mid-drain, then start a replacement;
- kill -9 a worker with requests in flight, then start a replacement;
- restart NATS, then Postgres (a fast shutdown: every connection drops);
- SIGSTOP a worker with requests in flight for three leases, then SIGCONT: its runs were rescued under
  a new epoch meanwhile, so its late results must be discarded (`scheduler_stale_results_total`).

A longer window repeats the cycle. The runs come due spread over the window, so work is in flight
at every fault; max_attempts is generous, so every run must succeed.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx

from app.config import Settings
from app.dev import EmbeddedNats, EmbeddedPostgres
from tests.faults.report import Fault, Report, check
from tests.faults.stack import embedded, stack_settings, stale_counters
from tests.processes import Process, processes
from tests.receiver import Receiver, running_receiver

TENANT = "faults"
JOB = "hook"
DB_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError)
BATCH = 500
SECONDS_PER_CYCLE = 40.0  # one round of the five faults


@dataclass(frozen=True)
class Config:
    runs: int = 400
    duration: float = 40.0  # the runs come due over this window, and the faults land in it
    max_attempts: int = 25
    max_sleep: float = 0.8  # each run's payload holds the receiver's answer up to this long
    seed: int = 8
    drain_timeout: float = 120.0  # after the window, for the last runs to finish


class Harness:
    def __init__(
        self,
        config: Config,
        settings: Settings,
        spawn: Callable[..., Process],
        receiver: Receiver,
        postgres: EmbeddedPostgres,
        nats: EmbeddedNats,
        pool: asyncpg.Pool,
        started: float,
    ):
        self.config = config
        self.settings = settings
        self.spawn = spawn
        self.receiver = receiver
        self.postgres = postgres
        self.nats = nats
        self.pool = pool
        self.rng = random.Random(config.seed)
        self.started = started  # time.monotonic() when the harness began, servers' start included
        self.faults: list[Fault] = []
        self.apis: list[Process] = []
        self.workers: dict[str, Process] = {}  # by lease owner
        self.names = {"api": 0, "worker": 0}
        self.late_results_discarded = 0.0

    # ── processes ──

    def _spawn(self, role: str) -> tuple[str, Process]:
        self.names[role] += 1
        owner = f"{role}-{self.names[role]}"
        return owner, self.spawn(role, SCHEDULER_OWNER=owner)

    async def start_processes(self) -> None:
        for _ in range(2):
            self.apis.append(self._spawn("api")[1])
            owner, worker = self._spawn("worker")
            self.workers[owner] = worker
        await asyncio.gather(*(p.wait_ready(60) for p in [*self.apis, *self.workers.values()]))

    def note(self, kind: str, detail: str) -> None:
        fault = Fault(
            time.monotonic() - self.started,
            datetime.now(UTC).isoformat(timespec="milliseconds"),
            kind,
            detail,
        )
        self.faults.append(fault)
        print(f"  {fault.render()}", flush=True)

    # ── load ──

    async def submit(self) -> tuple[list[str], float]:
        """Creates the tenant and job, submits every run; returns their ids and when the last is due."""
        c = self.config
        base = f"http://127.0.0.1:{self.apis[0].port}"
        async with httpx.AsyncClient(base_url=base, timeout=60) as api:
            admin = {"Authorization": f"Bearer {self.settings.admin_token}"}
            r = await api.post("/tenants", json={"id": TENANT}, headers=admin)
            assert r.status_code == 201, r.text
            auth = {"Authorization": f"Bearer {r.json()['api_key']}"}
            job = {
                "target": {"type": "http", "url": self.receiver.url},
                "max_attempts": c.max_attempts,
                "backoff_seconds": 0.2,
                "timeout_seconds": 10,
            }
            r = await api.put(f"/tenants/{TENANT}/jobs/{JOB}", json=job, headers=auth)
            assert r.status_code == 201, r.text
            now = datetime.now(UTC)
            runs = [
                {
                    "job": JOB,
                    "scheduled_at": (now + timedelta(seconds=self.rng.uniform(0.5, c.duration))).isoformat(),
                    "payload": {"sleep": round(self.rng.uniform(0.05, c.max_sleep), 3)},
                }
                for _ in range(c.runs)
            ]
            ids: list[str] = []
            for i in range(0, len(runs), BATCH):
                r = await api.post(
                    f"/tenants/{TENANT}/runs/batch", json={"runs": runs[i : i + BATCH]}, headers=auth
                )
                assert r.status_code == 201, r.text
                ids += [run["id"] for run in r.json()["runs"]]
        return ids, time.monotonic() + c.duration

    async def fetch(self, sql: str, *args: object) -> list[asyncpg.Record]:
        """The harness's own reads ride out the Postgres restart it causes."""
        for _ in range(120):
            try:
                return await self.pool.fetch(sql, *args)
            except DB_ERRORS:
                await asyncio.sleep(0.5)
        return await self.pool.fetch(sql, *args)

    async def running_of(self, owner: str) -> list[asyncpg.Record]:
        return await self.fetch(
            "SELECT id, epoch FROM job_runs WHERE status = 'running' AND lease_owner = $1 AND tenant_id = $2",
            owner,
            TENANT,
        )

    async def busiest_worker(self) -> tuple[str, list[asyncpg.Record]]:
        """A live worker with requests in flight (waits for one), and its running runs."""
        deadline = time.monotonic() + 15
        while True:
            rows = await self.fetch(
                "SELECT id, epoch, lease_owner FROM job_runs WHERE status = 'running' AND tenant_id = $1",
                TENANT,
            )
            by_owner: dict[str, list[asyncpg.Record]] = {}
            for row in rows:
                if row["lease_owner"] in self.workers:
                    by_owner.setdefault(row["lease_owner"], []).append(row)
            if by_owner or time.monotonic() > deadline:
                alive = [o for o, p in self.workers.items() if p.proc.poll() is None] or list(self.workers)
                owner = max(alive, key=lambda o: len(by_owner.get(o, [])))
                return owner, by_owner.get(owner, [])
            await asyncio.sleep(0.02)

    # ── faults ──

    async def kill_api(self) -> None:
        victim = self.apis.pop(0)
        await asyncio.to_thread(victim.kill)
        self.note("kill -9 api", f"api on :{victim.port} (pid {victim.proc.pid}), its engine mid-drain")
        replacement = self._spawn("api")[1]
        await replacement.wait_ready(60)
        self.apis.append(replacement)
        self.note("start api", f"replacement on :{replacement.port} ready")

    async def kill_worker(self) -> None:
        owner, running = await self.busiest_worker()
        victim = self.workers.pop(owner)
        await asyncio.to_thread(victim.kill)
        self.note("kill -9 worker", f"{owner} (pid {victim.proc.pid}) with {len(running)} requests in flight")
        new_owner, replacement = self._spawn("worker")
        await replacement.wait_ready(60)
        self.workers[new_owner] = replacement
        self.note("start worker", f"{new_owner} ready")

    async def restart_nats(self) -> None:
        self.note("restart nats", "stopping")
        await asyncio.to_thread(self.nats.restart)
        self.note("nats back", "listening again")

    async def restart_postgres(self) -> None:
        self.note("restart postgres", "fast shutdown: every connection drops")
        await asyncio.to_thread(self.postgres.restart)
        self.note("postgres back", "accepting connections again")

    async def freeze_worker(self) -> None:
        pause = 3 * self.settings.lease_seconds
        for _ in range(5):
            owner, _running = await self.busiest_worker()
            victim = self.workers[owner]
            before = stale_counters(await victim.metrics())
            victim.signal(signal.SIGSTOP)
            await asyncio.sleep(0.3)  # an outcome already on its way to Postgres lands first
            # What the frozen worker still holds, read from the database: its late results are these.
            held = await self.running_of(owner)
            if held:
                break
            victim.signal(signal.SIGCONT)  # its requests all finished just before the stop: again
        self.note("SIGSTOP worker", f"{owner} holding {len(held)} running runs, for {pause:g}s")
        await asyncio.sleep(pause)
        now = {
            r["id"]: r["epoch"]
            for r in await self.fetch(
                "SELECT id, epoch FROM job_runs WHERE id = ANY($1::uuid[])", [r["id"] for r in held]
            )
        }
        rescued = sum(1 for r in held if now[r["id"]] > r["epoch"])
        victim.signal(signal.SIGCONT)
        deadline = time.monotonic() + 15
        while (
            stale_counters(await victim.metrics())["finish"] <= before["finish"]
            and time.monotonic() < deadline
        ):
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)  # the rest of its late results
        discarded = stale_counters(await victim.metrics())["finish"] - before["finish"]
        self.late_results_discarded += discarded
        self.note(
            "SIGCONT worker",
            f"{owner}: {rescued} of its runs were rescued under a newer epoch meanwhile; "
            f"its late results discarded: {discarded:g}",
        )

    async def inject(self, window_end: float) -> None:
        cycle = [
            self.kill_api,
            self.kill_worker,
            self.restart_nats,
            self.restart_postgres,
            self.freeze_worker,
        ]
        cycles = max(1, round(self.config.duration / SECONDS_PER_CYCLE))
        faults = cycle * cycles
        slot = (window_end - time.monotonic()) / (len(faults) + 1)
        for i, fault in enumerate(faults):
            await asyncio.sleep(max(0.0, window_end - slot * (len(faults) - i) - time.monotonic()))
            await fault()

    async def drain(self, ids: list[str], window_end: float) -> bool:
        deadline = window_end + self.config.drain_timeout
        last = 0.0
        while time.monotonic() < deadline:
            rows = await self.fetch(
                "SELECT status, count(*) AS n FROM job_runs WHERE tenant_id = $1 GROUP BY 1", TENANT
            )
            counts = {r["status"]: r["n"] for r in rows}
            if time.monotonic() - last > 5:
                print(f"  t={time.monotonic() - self.started:6.1f}s {counts}", flush=True)
                last = time.monotonic()
            open_runs = sum(n for s, n in counts.items() if s not in ("succeeded", "failed", "cancelled"))
            if time.monotonic() > window_end and open_runs == 0 and sum(counts.values()) >= len(ids):
                return True
            await asyncio.sleep(0.25)
        return False

    async def run(self) -> Report:
        await self.start_processes()
        print(f"  stack ready after {time.monotonic() - self.started:.1f}s", flush=True)
        ids, window_end = await self.submit()
        injector = asyncio.create_task(self.inject(window_end))
        drained = await self.drain(ids, window_end)
        await injector
        if not drained:  # the injector may have finished after the drain's deadline
            drained = await self.drain(ids, time.monotonic())
        await asyncio.sleep(1.0)  # any late call reaches the receiver before it is read
        rows = await self.fetch(
            "SELECT id::text AS id, status, attempt, max_attempts, epoch FROM job_runs WHERE tenant_id = $1",
            TENANT,
        )
        # A process that exited without being killed is a finding of its own.
        died = [
            f"{p.role} on :{p.port} exited {p.proc.returncode} ({p.log_path})"
            for p in [*self.apis, *self.workers.values()]
            if p.proc.poll() is not None
        ]
        stale = {
            f"{owner} {stage}": value
            for owner, worker in self.workers.items()
            if worker.proc.poll() is None
            for stage, value in stale_counters(await worker.metrics()).items()
        }
        return check(
            died,
            ids,
            rows,
            self.receiver.calls,
            self.faults,
            self.late_results_discarded,
            stale,
            time.monotonic() - self.started,
        )


async def run(config: Config, root: Path) -> Report:
    """The whole harness in `root` (process logs stay in root/logs)."""
    started = time.monotonic()
    (root / "logs").mkdir(parents=True, exist_ok=True)
    async with embedded(root) as (postgres, nats, database_url, nats_url):
        settings = stack_settings(database_url, nats_url)
        pool = await asyncpg.create_pool(database_url, min_size=0, max_size=2)
        try:
            async with running_receiver() as receiver, processes(settings, root / "logs") as spawn:
                return await Harness(config, settings, spawn, receiver, postgres, nats, pool, started).run()
        finally:
            pool.terminate()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.faults.harness", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=int, default=Config.runs)
    parser.add_argument(
        "--duration", type=float, default=Config.duration, help="seconds the runs come due over"
    )
    parser.add_argument("--seed", type=int, default=Config.seed)
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs, data) afterwards")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="scheduler-faults-"))
    print(f"fault harness: {args.runs} runs over {args.duration:g}s, logs in {root / 'logs'}", flush=True)
    report = asyncio.run(run(Config(runs=args.runs, duration=args.duration, seed=args.seed), root))
    print(report.render())
    failed = bool(report.violations())
    if failed or args.keep:
        print(f"kept {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
