"""peers: the same N no-op jobs drained by the scheduler (`drain`: one engine + one worker process,
with the JetStream hop between them), by pgqueuer (tuned as its docs advise: several consumers,
batches of 100) and by procrastinate (its defaults: one worker, concurrency 1), on the same Postgres,
each in a fresh database of its own, in back-to-back rounds whose order alternates (ours first, then
the peers first), so drift on a shared machine hits every side.

Every side is timed the same way: from the instant its jobs are due (ours: the burst's due_at; a
peer: the commit of its enqueue, when its jobs become visible) until a count polled every 0.1 s
says every job is done. Per job, each side's CPU by process (/proc) and Postgres's work (row
versions, index entries, transactions, WAL; bench.pgstats) are diffed over its drain, enqueue
included."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import statistics
import sys
import time
from dataclasses import dataclass

import asyncpg

from bench import endtoend, pgstats
from bench.measure import cpu_seconds, rate, wait_for_count
from bench.peers import missing_peers
from bench.report import Report
from bench.scenarios._common import begin, shared_host, sized
from bench.stack import Bench
from stack import databases
from stack.databases import with_database

NAME = "peers"
HELP = "ours vs pgqueuer (tuned) vs procrastinate (defaults): N no-op jobs, alternated rounds, ratios"
OURS = "scheduler"
PEERS = ("pgqueuer", "procrastinate")
MODULES = {"pgqueuer": "pgqueuer_consumer", "procrastinate": "procrastinate_worker"}
POLL = 0.1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=int, help="jobs per drain, every side (default 20000; smoke 200)")
    p.add_argument("--pairs", type=int, help="rounds, each a drain of every side (default 3; smoke 1)")
    p.add_argument("--peers", default=",".join(PEERS), help=f"which peers (default {','.join(PEERS)})")
    p.add_argument("--tenants", type=int, default=50, help="our tenants (the peers have none)")
    p.add_argument("--pgqueuer-consumers", type=int, default=5)
    p.add_argument("--pgqueuer-batch-size", type=int, default=100)
    p.add_argument("--timeout", type=float, default=900.0)


@dataclass
class Side:
    name: str
    wall: float
    cpu: dict[str, float]
    postgres: pgstats.Work

    def per_second(self, n: int) -> float:
        return rate(n, self.wall)


async def _remaining(url: str, sql: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval(sql))
    finally:
        await conn.close()


class Peer:
    """One peer's drain: fresh database, its schema, its consumer process ready, then the jobs."""

    def __init__(self, bench: Bench, name: str, args: argparse.Namespace):
        self.bench, self.name, self.args = bench, name, args

    def command(self, url: str) -> list[str]:
        if self.name == "pgqueuer":
            return [
                sys.executable,
                "-m",
                "bench.peers.pgqueuer_consumer",
                url,
                "--consumers",
                str(self.args.pgqueuer_consumers),
                "--batch-size",
                str(self.args.pgqueuer_batch_size),
            ]
        return [sys.executable, "-m", "bench.peers.procrastinate_worker", url]

    async def drain(self, n: int) -> Side:
        admin = self.bench.services.postgres_url
        db = await databases.create_database(admin, f"bench_{os.getpid()}_{self.name}")
        url = with_database(admin, db)
        mod = importlib.import_module(f"bench.peers.{MODULES[self.name]}")
        # Done: pgqueuer deletes a finished job from its queue table; procrastinate marks it succeeded.
        done_sql = (
            f"SELECT {n} - count(*) FROM pgqueuer"
            if self.name == "pgqueuer"
            else "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
        )
        log = (self.bench.logs / f"peer-{self.name}.log").open("a")
        proc: asyncio.subprocess.Process | None = None
        try:
            await mod.install(url)
            proc = await asyncio.create_subprocess_exec(
                *self.command(url), stdout=asyncio.subprocess.PIPE, stderr=log
            )
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            if line.strip() != b"ready":
                raise RuntimeError(f"{self.name} consumer did not start (see {log.name})")
            before = await pgstats.snapshot(url)
            cpu_before = cpu_seconds({self.name: proc.pid})
            await mod.enqueue(url, n)
            start = time.perf_counter()
            done = await wait_for_count(
                lambda: _remaining(url, done_sql), n, desc=self.name, interval=POLL, timeout=self.args.timeout
            )
            cpu_after = cpu_seconds({self.name: proc.pid})
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 15)
            after = await pgstats.snapshot(url)
        finally:
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()
            log.close()
            await databases.drop_database(admin, db)
        cpu = {k: cpu_after[k] - cpu_before[k] for k in cpu_after}
        return Side(self.name, done - start, cpu, pgstats.work(before, after, n))


async def _ours(bench: Bench, n: int, args: argparse.Namespace) -> Side:
    d = await endtoend.drain(bench, n, tenants=args.tenants, timeout=args.timeout, interval=POLL)
    return Side(OURS, d.wall, d.cpu, d.postgres)


def unavailable() -> str | None:
    """Why this scenario cannot run here, or None: `bench all` skips it and says so."""
    missing = missing_peers()
    if missing:
        return f"needs {', '.join(missing)}: pip install -e '.[peers]'"
    return None


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    reason = unavailable()
    if reason:
        raise SystemExit(f"peers: {reason}")
    report = await begin(bench, NAME)
    n = sized(args.runs, full=20_000, smoke=200, is_smoke=bench.smoke)
    pairs = sized(args.pairs, full=3, smoke=1, is_smoke=bench.smoke)
    peers = [p for p in args.peers.split(",") if p]
    unknown = set(peers) - set(PEERS)
    if unknown:
        raise SystemExit(
            f"peers: unknown peer(s) {', '.join(sorted(unknown))}; choose from {', '.join(PEERS)}"
        )
    report.workload = {
        "jobs per drain": n,
        "rounds": pairs,
        OURS: f"1 engine + 1 worker process, app defaults, {args.tenants} tenants, noop target",
        "completion": f"a count polled every {POLL} s, from the jobs' due instant",
    }
    described = {
        "pgqueuer": f"{_version('pgqueuer')}: {args.pgqueuer_consumers} consumers (QueueManager, one "
        f"connection each) in one process, batch_size {args.pgqueuer_batch_size}",
        "procrastinate": f"{_version('procrastinate')}: one worker, its defaults (concurrency 1)",
    }
    report.workload |= {p: described[p] for p in peers}
    rounds: list[dict[str, Side]] = []
    for i in range(pairs):
        order = [OURS, *peers] if i % 2 == 0 else [*peers, OURS]
        sides: dict[str, Side] = {}
        for name in order:
            sides[name] = await (_ours(bench, n, args) if name == OURS else Peer(bench, name, args).drain(n))
            print(f"  round {i + 1}: {name} {sides[name].per_second(n):,.0f} jobs/s", flush=True)
        rounds.append(sides)
    _figures(report, rounds, peers, n)
    return report


def _version(package: str) -> str:
    from importlib.metadata import version

    return f"{package} {version(package)}"


def _figures(report: Report, rounds: list[dict[str, Side]], peers: list[str], n: int) -> None:
    report.table(
        "Each round (jobs/s; ratio = ours / peer)",
        ["round", "order", OURS, *peers, *[f"x {p}" for p in peers]],
        [
            [
                i + 1,
                " → ".join(r),
                r[OURS].per_second(n),
                *[r[p].per_second(n) for p in peers],
                *[r[OURS].per_second(n) / r[p].per_second(n) for p in peers],
            ]
            for i, r in enumerate(rounds)
        ],
    )
    ratios = {p: [r[OURS].per_second(n) / r[p].per_second(n) for r in rounds] for p in peers}
    report.table(
        "Ours / peer over the rounds",
        ["peer", "median", "min", "max", "rounds"],
        [[p, statistics.median(v), min(v), max(v), len(v)] for p, v in ratios.items()],
    )
    for p, v in ratios.items():
        report.target(f"drain rate, ours / {p} (median of rounds)", statistics.median(v), ">=", 1.0, "x")
    sides = [OURS, *peers]
    labels: list[str] = []
    for r in rounds:
        for s in r.values():
            labels += [k for k in s.cpu if k not in labels]
    report.table(
        "CPU per job by process, µs (mean over rounds; /proc: 'postgres' and 'nats-server' are every "
        "process of that name on this host, other users' included)",
        ["process", *sides],
        [
            [k, *[statistics.mean(r[s].cpu.get(k, 0.0) for r in rounds) / n * 1e6 for s in sides]]
            for k in labels
        ]
        + [["total", *[statistics.mean(sum(r[s].cpu.values()) for r in rounds) / n * 1e6 for s in sides]]],
    )
    columns, rows = pgstats.per_job_rows({s: [r[s].postgres for r in rounds] for s in sides})
    report.table("What Postgres did per job (statistics views, mean over rounds)", columns, rows)
    report.notes.append(f"Postgres figures from: {rounds[0][OURS].postgres.sources}")
    report.notes.append(
        "Network hops per job (by design, not measured): ours — engine⇄Postgres (claim, batched), "
        "engine→NATS→worker (publish, PubAck, fetch, ack), worker⇄Postgres (start and outcome, batched); "
        "pgqueuer and procrastinate — consumer⇄Postgres only (dequeue, then log/delete or update)."
    )
    report.data = {
        "rounds": [
            {s: {"wall": v.wall, "cpu": v.cpu, "postgres": v.postgres.figures} for s, v in r.items()}
            for r in rounds
        ]
    }
    report.not_mean = (
        "One machine, every side's processes sharing its cores with Postgres, NATS and the bench: the "
        "ratio says which drains the same no-op jobs faster here, not which is faster on hardware of "
        "its own. The sides do not do the same work: ours carries a JetStream hop to separate worker "
        "processes, fenced epochs, per-tenant fairness and a run's full record; pgqueuer deletes a "
        "finished job (its log keeps a row), procrastinate keeps the job and its events. pgqueuer is "
        "tuned, procrastinate is not (its defaults: the figures show what a user gets without tuning). "
        + shared_host(report, "Postgres, NATS and every side's processes")
    )
