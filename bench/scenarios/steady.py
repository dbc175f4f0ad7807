"""steady (due lag below capacity): runs submitted through the API at a fixed rate, each due at once,
for D seconds, into one `scheduler api` process (its engine on, as deployed) and one `scheduler
worker`. Open loop: a batch POST leaves every tick whether or not the last one has answered, so a
slow API cannot quietly lower the offered rate. The figure is each run's lag from due_at (the
database's clock at its insert) to dispatched_at, started_at and finished_at, over every run.

With `--standing N`, N runs of 50 other tenants at `--standing-priority` (default 9) are already due
and pending when submissions start, and the submitted runs carry `--priority` (default 0): the figure
is then the lag of urgent work submitted behind a standing backlog, to compare with the same
command without `--standing` (an idle system). Only the submitted runs' lag is reported."""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any

import httpx

from app.db.connection import create_pool
from app.dev import free_port
from bench import workload
from bench.measure import cpu_seconds, latency_ms, rate, wait_for_count
from bench.procs import SchedulerProcess, ops_process, running
from bench.progress import tqdm
from bench.report import Report
from bench.scenarios._common import api_tenant, begin, shared_host
from bench.stack import Bench, delete_stream

NAME = "steady"
HELP = "due lag at a steady submission rate below capacity (API + engine process, worker process)"
TENANT = "steady"
TICK = 0.1  # seconds between batch POSTs
PS = [0.5, 0.95, 0.99]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rate", type=float, help="runs submitted per second (default 1000; smoke 100)")
    p.add_argument("--duration", type=float, help="seconds of submissions (default 30; smoke 3)")
    p.add_argument("--timeout", type=float, default=120.0, help="wait this long for the last runs")
    p.add_argument(
        "--priority", type=int, default=None, help="priority of the submitted runs (default: the job's, 5)"
    )
    p.add_argument(
        "--standing", type=int, default=0, help="runs of other tenants due and pending at the start"
    )
    p.add_argument("--standing-priority", type=int, default=9, help="their priority (default 9)")
    p.add_argument(
        "--lane-processes",
        action="store_true",
        help="serve the urgent lane with an engine and a worker of its own (LANES=urgent), the rest "
        "with LANES=normal",
    )
    p.add_argument(
        "--nice-bulk",
        type=int,
        default=0,
        help="with --lane-processes: renice the normal lane's processes by this much, so the urgent "
        "lane's get the CPU first (what CPU reserved for them would give)",
    )


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    report = await begin(bench, NAME)
    offered = args.rate or (100.0 if bench.smoke else 1000.0)
    duration = args.duration or (3.0 if bench.smoke else 30.0)
    ticks = max(1, round(duration / TICK))
    async with bench.database() as url:
        s = bench.settings(url, port=free_port())
        lanes = "normal" if args.lane_processes else "all"
        api = SchedulerProcess("api", s.model_copy(update={"lanes": lanes}), bench.logs)
        worker = ops_process("worker", s.model_copy(update={"lanes": lanes}), bench.logs, stop_timeout=5.0)
        urgent_only = s.model_copy(update={"lanes": "urgent"})
        lane_procs = (
            [
                ops_process("engine", urgent_only, bench.logs, name="urgent-engine"),
                ops_process("worker", urgent_only, bench.logs, name="urgent-worker", stop_timeout=5.0),
            ]
            if args.lane_processes
            else []
        )
        report.workload = {
            "offered rate": f"{offered:,.0f} runs/s for {duration:g} s",
            "submissions": f"{ticks} batch POSTs, one every {TICK} s",
            "processes": "1 scheduler api (its engine on, as deployed) + 1 scheduler worker"
            + (
                ", both LANES=normal, + 1 engine and 1 worker with LANES=urgent"
                + (f"; the normal lane's niced by {args.nice_bulk}" if args.nice_bulk else "")
                if args.lane_processes
                else ""
            ),
            "job": "noop, due at submission (no scheduled_at)",
            "engine poll interval": f"{s.poll_interval_seconds} s (NOTIFY wakes it sooner)",
            "batch_size": s.batch_size,
            "submitted runs' priority": "the job's (5)" if args.priority is None else args.priority,
            "standing backlog": f"{args.standing:,} noop runs of 50 other tenants at priority "
            f"{args.standing_priority}, due before the first submission"
            if args.standing
            else "none (an idle system)",
            "max_queue_seconds": s.max_queue_seconds,
        }
        pool = await create_pool(url, min_size=1, max_size=2, name="bench-steady")
        nc = await bench.nats()
        try:
            if args.standing:
                async with pool.acquire() as conn:
                    await workload.seed_tenants(conn, 50)
                    await workload.standing_backlog(conn, args.standing, 50, spread_seconds=60.0)
                    await workload.execute(conn, "set_backlog_priority", priority=args.standing_priority)
                    # The UPDATE left a dead index entry per run where the claim walks (priority 5):
                    # vacuumed, as autovacuum would have, so the figure is not about this setup step.
                    await conn.execute("VACUUM ANALYZE job_runs, run_queue")
            async with running([api, worker, *lane_procs]):
                if args.lane_processes and args.nice_bulk:
                    for p in (api, worker):
                        os.setpriority(os.PRIO_PROCESS, p.pid, args.nice_bulk)
                async with httpx.AsyncClient(base_url=api.base_url, timeout=30.0) as client:
                    auth = await api_tenant(client, TENANT)
                    pids = {"api + engine process": api.pid, "worker process": worker.pid} | {
                        f"{p.name} process": p.pid for p in lane_procs
                    }
                    cpu_before = cpu_seconds(pids)
                    submitted, post_latencies, errors, wall = await _offer(
                        client, auth, offered, ticks, args.priority
                    )
                cpu = cpu_seconds(pids)
                async with pool.acquire() as conn:
                    standing_left = await workload.count_status(conn, "pending")

                async def terminal() -> int:
                    async with pool.acquire() as c:
                        return await workload.count_status(c, "succeeded")

                await wait_for_count(
                    terminal, submitted + args.standing, desc="last runs", interval=0.25, timeout=args.timeout
                )
            async with pool.acquire() as conn:
                lags = (await workload.fetch(conn, "lag_percentiles", ps=PS, tenant=TENANT))[0]
                counts = await workload.status_counts(conn)
        finally:
            await delete_stream(nc, s)
            await nc.close()
            await pool.close()
    used = {k: cpu[k] - cpu_before[k] for k in cpu}
    if args.standing:
        report.notes.append(
            f"standing backlog still pending when the last submission answered: {standing_left:,} of "
            f"{args.standing:,} (it must be > 0 for the figure to mean 'behind a standing backlog')."
        )
    _figures(report, offered, duration, submitted, errors, wall, post_latencies, lags, counts, used)
    return report


async def _offer(
    client: httpx.AsyncClient, auth: dict[str, str], offered: float, ticks: int, priority: int | None
) -> tuple[int, list[float], int, float]:
    """(runs accepted, POST latencies, failed POSTs, seconds) of the open-loop submission."""
    latencies: list[float] = []
    accepted = errors = 0
    path = f"/tenants/{TENANT}/runs/batch"

    async def post(n: int) -> None:
        nonlocal accepted, errors
        started = time.perf_counter()
        run = {"job": "noop"} if priority is None else {"job": "noop", "priority": priority}
        r = await client.post(path, json={"runs": [run] * n}, headers=auth)
        latencies.append(time.perf_counter() - started)
        if r.status_code == 201:
            accepted += n
        else:
            errors += 1

    in_flight: set[asyncio.Task[None]] = set()
    sent = 0
    t0 = time.perf_counter()
    with tqdm(total=ticks, desc="submitting", unit="POST", leave=False) as bar:
        for k in range(ticks):
            await asyncio.sleep(max(0.0, t0 + k * TICK - time.perf_counter()))
            n = round(offered * TICK * (k + 1)) - sent  # whole runs, no drift over the run
            sent += n
            if n:
                task = asyncio.create_task(post(n))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
            bar.update(1)
        await asyncio.gather(*in_flight)
    return accepted, latencies, errors, time.perf_counter() - t0


def _figures(
    report: Report,
    offered: float,
    duration: float,
    submitted: int,
    errors: int,
    wall: float,
    post_latencies: list[float],
    lags: Any,
    counts: dict[str, tuple[int, int]],
    cpu: dict[str, float],
) -> None:
    report.table(
        "Submissions",
        [
            "offered runs/s",
            "runs accepted",
            "failed POSTs",
            "seconds",
            "accepted runs/s",
            "POST p50 ms",
            "POST p99 ms",
        ],
        [
            [
                offered,
                submitted,
                errors,
                wall,
                rate(submitted, wall),
                latency_ms(post_latencies)["p50_ms"],
                latency_ms(post_latencies)["p99_ms"],
            ]
        ],
    )
    steps = (
        ("dispatched_at - due_at", "dispatched"),
        ("started_at - due_at", "started"),
        ("finished_at - due_at", "finished"),
    )
    report.table(
        "Due lag (seconds after due_at), over every submitted run",
        ["step", "p50", "p95", "p99"],
        [[step, *[float(x) for x in lags[col]]] for step, col in steps],
    )
    report.table(
        "CPU used while submitting, by process (from /proc; Postgres and NATS on this host, all of them)",
        ["process", "CPU seconds", "cores busy"],
        [[k, v, v / wall] for k, v in cpu.items()],
    )
    started_p99 = float(lags["started"][2])
    report.target("p99 due lag to start (started_at - due_at)", started_p99, "<=", 1.0, " s")
    report.notes.append(
        f"runs by status at the end: { {k: v[0] for k, v in counts.items()} }; runs claimed more than once "
        f"(epoch > 1): {sum(v[1] for v in counts.values())}."
    )
    report.data = {
        "offered": offered,
        "duration": duration,
        "accepted": submitted,
        "errors": errors,
        "lags": {k: lags[k] for k in ("dispatched", "started", "finished")},
        "cpu_seconds": cpu,
    }
    report.draw = lambda fig: _chart(fig, lags, steps)
    report.not_mean = (
        "This is one rate, well below what `drain` measures as capacity, with runs due the moment they are "
        "submitted, from one tenant with noop targets: the lag is the scheduler's own wake-up, claim, "
        "publish and start path, not a real target's latency, and it says nothing of lag at or beyond "
        "capacity (there the backlog, and so the lag, grows without bound) or with many tenants under "
        "the cap. " + shared_host(report, "Postgres, NATS, the API + engine and the worker")
    )


def _chart(fig: Any, lags: Any, steps: tuple[tuple[str, str], ...]) -> None:
    ax = fig.add_subplot(1, 1, 1)
    for i, (label, col) in enumerate(steps):
        values = [float(x) * 1000 for x in lags[col]]
        ax.bar([j * 4 + i for j in range(len(PS))], values, label=label)
    ax.set_xticks([j * 4 + 1 for j in range(len(PS))], [f"p{round(p * 100)}" for p in PS])
    ax.set_ylabel("ms after due_at")
    ax.set_title("Due lag at a steady rate")
    ax.legend(fontsize=8)
