"""workers: one `scheduler engine` and 1, 2, 4 `scheduler worker` processes draining the same N runs
end to end (as `drain` does, a fresh database and fresh processes per configuration), with the CPU
each process spent per run (/proc) and what Postgres did per run (bench.pgstats).

The per-run costs are what docs/bench.md turns into hardware for a given rate; the runs/s of each
configuration only say how the drain shares this machine's cores."""

from __future__ import annotations

import argparse

from bench import endtoend, pgstats, workload
from bench.measure import rate
from bench.report import Report
from bench.scenarios._common import add_backlog_arguments, begin, shared_host, sized
from bench.stack import Bench

NAME = "workers"
HELP = "1 engine + 1, 2, 4 worker processes drain N runs: runs/s and CPU per run of every process"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=int, help="runs per configuration (default 20000; smoke 300)")
    p.add_argument("--workers", default=None, help="comma-separated worker counts (default 1,2,4; smoke 1,2)")
    p.add_argument(
        "--target",
        choices=("noop", "python"),
        default="noop",
        help="noop, or python (the echo handler: the whole execute path)",
    )
    add_backlog_arguments(p)


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    report = await begin(bench, NAME)
    n = sized(args.runs, full=20_000, smoke=300, is_smoke=bench.smoke)
    counts = [int(x) for x in (args.workers or ("1,2" if bench.smoke else "1,2,4")).split(",")]
    target = workload.NOOP if args.target == "noop" else workload.ECHO
    results: list[tuple[int, endtoend.Drain]] = []
    for k in counts:
        d = await endtoend.drain(
            bench,
            n,
            tenants=args.tenants,
            target=target,
            analyze=args.analyze,
            timeout=args.timeout,
            workers=k,
        )
        print(f"  {k} worker(s): {rate(n, d.wall):,.0f} runs/s", flush=True)
        report.notes += d.notes
        results.append((k, d))
    report.workload = {
        "runs per configuration": n,
        "tenants": args.tenants,
        "target": args.target,
        "worker counts": ",".join(map(str, counts)),
        **results[0][1].settings,
    }
    _figures(report, results, n)
    return report


def _figures(report: Report, results: list[tuple[int, endtoend.Drain]], n: int) -> None:
    report.table(
        "Drain by worker count",
        ["workers", "seconds", "runs/s", "x 1 worker", "CPU µs per run, all processes"],
        [
            [
                k,
                d.wall,
                rate(n, d.wall),
                rate(n, d.wall) / rate(n, results[0][1].wall),
                sum(d.cpu.values()) / n * 1e6,
            ]
            for k, d in results
        ],
    )
    for k, d in results:
        report.table(
            f"{k} worker{'s' if k > 1 else ''}: {endtoend.CPU_TITLE}",
            endtoend.CPU_COLUMNS,
            endtoend.cpu_rows(d.cpu, n, d.wall),
        )
    columns, rows = pgstats.per_job_rows({f"{k} workers": [d.postgres] for k, d in results})
    report.table("What Postgres did per run", columns, rows)
    report.notes.append(f"Postgres figures from: {results[0][1].postgres.sources}")
    report.data = {
        "configurations": [
            {
                "workers": k,
                "wall": d.wall,
                "cpu": d.cpu,
                "postgres": d.postgres.figures,
                "workers_metrics": d.workers,
            }
            for k, d in results
        ]
    }
    report.not_mean = (
        "More worker processes here share the same 2 cores with the engine, Postgres and NATS, so runs/s "
        "cannot grow with them on this machine; what carries over to other hardware is the CPU per run of "
        "each process (and its sum over the workers), not the rate. "
        + shared_host(report, "Postgres, NATS, the engine and every worker process")
    )
