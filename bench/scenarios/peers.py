"""peers: the same N no-op jobs drained by the scheduler (`drain`: one engine + one worker process,
with the JetStream hop between them; with `--shape`, one or more backlog shapes, each a side of its
own) and by its peers, each in a fresh database of its own (Celery: a fresh embedded Redis as its
broker): pgqueuer (tuned as its docs advise: several consumers, batches of 100), procrastinate (its
defaults), graphile-worker (its defaults, and its performance page's fast preset), pg-boss (its batch
fetch and complete) and Celery (Redis broker, a tuned pool and prefetch). Rounds run back to back and
their order alternates (ours first, then the peers first), so drift on a shared machine hits every
side; each round prints the load average.

Every side is timed the same way: from the instant its jobs are due (ours: the burst's due_at; a
peer: the commit of its enqueue, when its jobs become visible) until a count polled every 0.1 s at
most, and closer as the end nears (bench/measure.py), says every job is done: a peer's count of the
jobs left in its queue; ours, the workers' count of the successes they recorded, checked once in
Postgres (bench/endtoend.py). Per job, each side's CPU by process (/proc; a consumer's child
processes count as its own) and Postgres's work (row versions, index entries, transactions, WAL;
bench.pgstats) are diffed over its drain, enqueue included. Every Postgres side's jobs become
visible with fresh statistics: ours are analyzed before they fall due, graphile-worker's, pg-boss's
and pgqueuer's tables in their enqueue's transaction. The Node peers are installed by the bench
with npm into a cache directory (bench.peers.node) and skipped, with the reason, when that cannot
be done."""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Any

from bench import endtoend, pgstats
from bench.peers import missing_peers
from bench.peers.sides import DRIVERS, Driver, Side, drain
from bench.report import Report
from bench.scenarios._common import add_shape_argument, begin, shapes, shared_host, sized
from bench.stack import Bench

NAME = "peers"
HELP = (
    "ours vs pgqueuer, procrastinate, graphile-worker (defaults, fast preset), pg-boss, Celery: N no-op "
    "jobs, alternated rounds, ratios"
)
OURS = "scheduler"
PEERS = tuple(DRIVERS)
# The drain-rate goals, ours / peer, the project holds itself to (docs/bench.md's summary table): ahead
# of the fastest Postgres queue that runs here, well ahead of tuned pgqueuer, by the median round and
# the worst. A peer not named here (untuned defaults, another kind of broker) is compared, not targeted.
GOALS = {"graphile-fast": 1.0, "pgqueuer": 1.5}
POLL = 0.1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=int, help="jobs per drain, every side (default 20000; smoke 200)")
    p.add_argument("--pairs", type=int, help="rounds, each a drain of every side (default 3; smoke 1)")
    p.add_argument("--peers", default=",".join(PEERS), help=f"which peers (default {','.join(PEERS)})")
    p.add_argument("--tenants", type=int, default=50, help="our tenants (the peers have none)")
    p.add_argument("--pgqueuer-consumers", type=int, default=5)
    p.add_argument("--pgqueuer-batch-size", type=int, default=100)
    p.add_argument("--pgboss-workers", type=int, default=4, help="pg-boss fetch/complete loops")
    p.add_argument("--pgboss-batch", type=int, default=500, help="pg-boss jobs per fetch")
    # threads x 4: of prefork x 2, solo and threads x 4 on this host, the fastest and cheapest per
    # no-op job (docs/bench.md, verdict 35).
    p.add_argument("--celery-pool", default="threads", choices=("prefork", "solo", "threads"))
    p.add_argument("--celery-concurrency", type=int, default=4, help="Celery pool size")
    p.add_argument("--celery-prefetch", type=int, default=100, help="Celery worker_prefetch_multiplier")
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument(
        "--npm-timeout",
        type=float,
        help="seconds the Node peers' npm install may take before they are skipped (default 300; smoke 120)",
    )
    add_shape_argument(p)


def unavailable() -> str | None:
    """Why this scenario cannot run here, or None: `bench all` skips it and says so."""
    missing = missing_peers()
    if missing:
        return f"needs {', '.join(missing)}: pip install -e '.[peers]'"
    return None


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    reason = unavailable()
    if reason:
        raise SystemExit(f"peers: {reason}")
    n = sized(args.runs, full=20_000, smoke=200, is_smoke=bench.smoke)
    pairs = sized(args.pairs, full=3, smoke=1, is_smoke=bench.smoke)
    wanted = [p for p in args.peers.split(",") if p]
    unknown = set(wanted) - set(PEERS)
    if unknown:
        raise SystemExit(
            f"peers: unknown peer(s) {', '.join(sorted(unknown))}; choose from {', '.join(PEERS)}"
        )
    args.npm_timeout = args.npm_timeout or (120.0 if bench.smoke else 300.0)
    ours = [f"{OURS} [{s}]" for s in shapes(args.shape)]
    drivers: dict[str, Driver] = {}
    skipped: list[str] = []
    for name in wanted:
        driver = DRIVERS[name](args)
        why = driver.unavailable()
        if why:
            print(f"peers: skipping {name}: {why}", flush=True)
            skipped.append(f"{name} skipped: {why}")
        else:
            drivers[name] = driver
    report = await begin(bench, NAME)
    report.notes += skipped
    peers = list(drivers)
    report.workload = {
        "jobs per drain": n,
        "rounds": pairs,
        OURS: f"1 engine + 1 worker process, app defaults, {args.tenants} tenants, noop target; backlog "
        f"shapes: {', '.join(shapes(args.shape))}",
        "completion": f"a count polled every {POLL} s at most, closer as the end nears, from the jobs' "
        "due instant (a peer's: the jobs left in its queue; ours: the successes the workers recorded, "
        "then checked in Postgres)",
    }
    report.workload |= {p: d.describe() for p, d in drivers.items()}
    rounds: list[dict[str, Side]] = []
    loads: list[str] = []
    for i in range(pairs):
        order = [*ours, *peers] if i % 2 == 0 else [*peers, *ours]
        sides: dict[str, Side] = {}
        loads.append(_load())
        print(f"  round {i + 1}: load average {loads[-1]}", flush=True)
        for name in order:
            if name in drivers:
                sides[name] = await drain(bench, drivers[name], n, POLL, args.timeout)
            else:
                sides[name] = await _ours(bench, n, args, name)
            print(f"  round {i + 1}: {name} {sides[name].per_second(n):,.0f} jobs/s", flush=True)
        loads[-1] += f" → {_load()}"
        print(f"  round {i + 1}: load average at its end {_load()}", flush=True)
        rounds.append(sides)
    _figures(report, rounds, ours, peers, n, loads)
    return report


async def _ours(bench: Bench, n: int, args: argparse.Namespace, label: str) -> Side:
    shape = label[label.index("[") + 1 : -1]
    d = await endtoend.drain(bench, n, tenants=args.tenants, timeout=args.timeout, interval=POLL, shape=shape)
    return Side(label, d.wall, d.cpu, d.postgres)


def _figures(
    report: Report,
    rounds: list[dict[str, Side]],
    ours: list[str],
    peers: list[str],
    n: int,
    loads: list[str],
) -> None:
    pairs = [(o, p) for o in ours for p in peers]

    def x(r: dict[str, Side], o: str, p: str) -> float:
        return r[o].per_second(n) / r[p].per_second(n)

    report.table(
        "Each round (jobs/s; x = ours / peer in that round; load average at the round's start → end)",
        [
            "round",
            "load average",
            *ours,
            *peers,
            *[f"x {p}" + (f" {o}" if len(ours) > 1 else "") for o, p in pairs],
        ],
        [
            [
                i + 1,
                loads[i],
                *[r[s].per_second(n) for s in [*ours, *peers]],
                *[x(r, o, p) for o, p in pairs],
            ]
            for i, r in enumerate(rounds)
        ],
    )
    rates = {s: [r[s].per_second(n) for r in rounds] for s in [*ours, *peers]}
    report.table(
        "Every side over the rounds (jobs/s)",
        ["side", "median", "worst", "best"],
        [[s, statistics.median(v), min(v), max(v)] for s, v in rates.items()],
    )
    ratios = {(o, p): [x(r, o, p) for r in rounds] for o, p in pairs}
    report.table(
        "Ours / peer, pair by pair (each round's ratio; median and worst round)",
        ["ours", "peer", "median", "worst", "best", "rounds"],
        [[o, p, statistics.median(v), min(v), max(v), len(v)] for (o, p), v in ratios.items()],
    )
    for (o, p), v in ratios.items():
        if (goal := GOALS.get(p)) is not None:
            report.target(f"drain rate, {o} / {p} (median of rounds)", statistics.median(v), ">=", goal, "x")
            report.target(f"drain rate, {o} / {p} (worst round)", min(v), ">=", goal, "x")
    _costs(report, rounds, [*ours, *peers], n)
    report.notes.append(
        "Network hops per job (by design, not measured): ours — engine⇄Postgres (claim, batched), "
        "engine→NATS→worker (publish, PubAck, fetch, ack), worker⇄Postgres (start and outcome, batched); "
        "the api shape adds the HTTP submission and the API's insert. The Postgres peers — consumer⇄"
        "Postgres only (dequeue, then delete or update); Celery — worker⇄Redis (BRPOP, ack)."
    )
    report.data = {
        "loads": loads,
        "rounds": [
            {s: {"wall": v.wall, "cpu": v.cpu, "postgres": v.postgres.figures} for s, v in r.items()}
            for r in rounds
        ],
    }
    report.not_mean = (
        "One machine, every side's processes sharing its cores with Postgres, NATS and the bench: the "
        "ratio says which drains the same no-op jobs faster here, not which is faster on hardware of "
        "its own. The sides do not do the same work: ours carries a JetStream hop to separate worker "
        "processes, fenced epochs, per-tenant fairness and a run's full record; pgqueuer and "
        "graphile-worker delete a finished job, procrastinate and pg-boss keep it marked done, Celery "
        "keeps nothing (no result backend). procrastinate and graphile-worker's defaults are untuned "
        "(what a user gets without tuning). "
        + shared_host(report, "Postgres, NATS and every side's processes")
    )


def _costs(report: Report, rounds: list[dict[str, Side]], sides: list[str], n: int) -> None:
    labels: list[str] = []
    for r in rounds:
        for s in r.values():
            labels += [k for k in s.cpu if k not in labels]
    rows: list[list[Any]] = [
        [k, *[statistics.mean(r[s].cpu.get(k, 0.0) for r in rounds) / n * 1e6 for s in sides]] for k in labels
    ]
    rows.append(
        ["total", *[statistics.mean(sum(r[s].cpu.values()) for r in rounds) / n * 1e6 for s in sides]]
    )
    report.table(
        "CPU per job by process, µs (mean over rounds; /proc: 'postgres' and 'nats-server' are every "
        "process of that name on this host, other users' included)",
        ["process", *sides],
        rows,
    )
    columns, pg_rows = pgstats.per_job_rows({s: [r[s].postgres for r in rounds] for s in sides})
    report.table("What Postgres did per job (statistics views, mean over rounds)", columns, pg_rows)
    report.notes.append(f"Postgres figures from: {rounds[0][sides[0]].postgres.sources}")
