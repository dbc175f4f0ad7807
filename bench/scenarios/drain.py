"""drain (end to end): N runs (noop by default) through real processes — one `scheduler engine` and one
`scheduler worker` subprocess, configured by environment as deployed, app defaults — timed from the
moment the backlog falls due until every run is `succeeded` in Postgres.

The processes start first and wait, ready; the backlog is then committed in one transaction due a
moment later (with the NOTIFY a submission sends), and the bench NOTIFYs again at the due instant,
so neither process start-up nor the engine's idle poll interval is in the figure."""

from __future__ import annotations

import argparse
from typing import Any

from app.db.connection import create_pool
from bench import workload
from bench.measure import cpu_seconds, rate, wait_for_count
from bench.procs import ops_process, running, scrape_all
from bench.report import Report
from bench.scenarios._common import (
    add_backlog_arguments,
    begin,
    engine_summary,
    shared_host,
    sized,
    worker_summary,
)
from bench.stack import Bench, delete_stream

NAME = "drain"
HELP = "end to end: engine + worker subprocesses drain N runs to succeeded (runs/s, due lag)"
PS = [0.5, 0.95, 0.99]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=int, help="runs (default 20000; smoke 500)")
    p.add_argument(
        "--target",
        choices=("noop", "python"),
        default="noop",
        help="noop: started and recorded in one write; python: the echo handler, which takes the "
        "whole execute path (a task, then the outcome in a separate group-committed write)",
    )
    add_backlog_arguments(p)


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    report = await begin(bench, NAME)
    n = sized(args.runs, full=20_000, smoke=500, is_smoke=bench.smoke)
    lead = 0.5 + n / 10_000  # room to commit the backlog before it falls due
    async with bench.database() as url:
        base = bench.settings(url)
        engine = ops_process("engine", base, bench.logs)
        # The drain is over once every outcome is recorded; a worker slow to exit (its shutdown once
        # waited out nc.drain()'s 30 s timeout) is killed after a few seconds and reported.
        worker = ops_process("worker", base, bench.logs, stop_timeout=5.0)
        report.workload = {
            "runs": n,
            "tenants": args.tenants,
            "target": "noop" if args.target == "noop" else "python (the echo handler)",
            "processes": "1 scheduler engine + 1 scheduler worker",
            "batch_size": base.batch_size,
            "worker_concurrency": base.worker_concurrency,
            "worker_fetch_batch": base.worker_fetch_batch,
            "completion": "count(status='succeeded') polled every 0.25 s",
            "statistics": "ANALYZE with the backlog" if args.analyze else "none (--no-analyze)",
        }
        pool = await create_pool(url, min_size=1, max_size=2, name="bench-drain")
        nc = await bench.nats()
        try:
            async with pool.acquire() as conn:
                await workload.seed_tenants(conn, args.tenants)
            async with running([engine, worker]):
                before = await scrape_all([engine, worker])
                pids = {"engine process": engine.pid, "worker process": worker.pid}
                cpu_before = cpu_seconds(pids)
                async with pool.acquire() as conn:
                    target = workload.NOOP if args.target == "noop" else workload.ECHO
                    due_at, start = await workload.due_burst(
                        conn, n, args.tenants, lead, analyze=args.analyze, target=target
                    )
                    await workload.wake_at(conn, start, due_at)

                async def succeeded() -> int:
                    async with pool.acquire() as c:
                        return await workload.count_status(c, "succeeded")

                done = await wait_for_count(succeeded, n, desc="drain", interval=0.25, timeout=args.timeout)
                after = await scrape_all([engine, worker])
                cpu_after = cpu_seconds(pids)
                alive = engine.alive() and worker.alive()
            async with pool.acquire() as conn:
                lags = (await workload.fetch(conn, "lag_percentiles", ps=PS, tenant=None))[0]
                counts = await workload.status_counts(conn)
        finally:
            await delete_stream(nc, base.stream)
            await nc.close()
            await pool.close()
    if not alive:
        report.notes.append("a process exited during the drain; see its log under the bench's temp dir")
    if worker.killed:
        report.notes.append(
            "the worker did not exit within 5 s of SIGTERM and was killed, after every outcome was recorded "
            "(see its log): a shutdown problem of the worker, not part of the figures."
        )
    wall = done - start
    cpu = {k: cpu_after[k] - cpu_before[k] for k in cpu_after}
    report.table(
        "CPU used during the drain, by process (from /proc; Postgres and NATS on this host, all of them)",
        ["process", "CPU seconds", "us per run", "cores busy"],
        [[k, v, v / n * 1e6, v / wall] for k, v in cpu.items()]
        + [["total", sum(cpu.values()), sum(cpu.values()) / n * 1e6, sum(cpu.values()) / wall]],
    )
    report.data["cpu_seconds"] = cpu
    _figures(
        report,
        n,
        wall,
        lags,
        engine_summary(after[0] - before[0]),
        worker_summary(after[1] - before[1]),
        counts,
    )
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
