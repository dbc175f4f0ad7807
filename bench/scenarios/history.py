"""history: claim latency and `GET /runs/{id}` latency with the pending set held equal while history
grows.

P pending runs (due over the last minutes) stay put; terminal (succeeded) history spread over 365
past daily partitions grows 10k → 100k → 1M → … → --max-history (10M, 100M: the design's target),
written straight into the partitions (bench.history_data: generate_series, indexes rebuilt in bulk),
then ANALYZEd. Each claim sample is rolled back so pending stays equal; each GET reads a run drawn
from the whole history through a real `scheduler api` process (engine off) with its tenant's key.
The design's claims: claim cost tracks pending runs, not history, and a GET reads one partition, so
p50 (and the GET's p99) at the largest history / at 10k should stay ≤ 1.5."""

from __future__ import annotations

import argparse
import random
import shutil
import time
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx

from app.db import transitions as repo
from app.db.connection import create_pool
from app.db.queries import QUERIES
from app.db.run_ids import scheduled_bounds
from app.dev import free_port
from app.engine.claims import claim_scan
from app.engine.floor import ClaimBounds
from bench import history_data, workload
from bench.measure import latency_ms
from bench.procs import SchedulerProcess, running
from bench.progress import tqdm
from bench.report import Report
from bench.scenarios._common import api_tenant, begin, shared_host, sized
from bench.stack import Bench

NAME = "history"
HELP = "claim and GET /runs/{id} latency, pending held equal, as history grows (10k → 1M, 10M, 100M)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pending", type=int, help="pending runs held equal (default 5000; smoke 500)")
    p.add_argument("--max-history", type=int, help="largest history (default 1000000; smoke 100000)")
    p.add_argument(
        "--days", type=int, help="past daily partitions the history spreads over (default 365; smoke 20)"
    )
    p.add_argument("--tenants", type=int, default=50)
    p.add_argument("--samples", type=int, help="claim samples per point (default 50; smoke 10)")
    p.add_argument("--gets", type=int, help="GET /runs/{id} per point (default 500; smoke 50)")


def points(max_history: int) -> list[int]:
    """10k, 100k, 1M, … up to max_history (which is always the last point)."""
    out, p = [], 10_000
    while p < max_history:
        out.append(p)
        p *= 10
    return [*out, max_history]


async def _grow(conn: asyncpg.Connection, have: int, want: int, args: Any, today: datetime) -> float:
    t0 = time.perf_counter()
    await history_data.grow(conn, have=have, want=want, days=args.days, tenants=args.tenants, today=today)
    await conn.execute("ANALYZE job_runs, run_queue", timeout=3600)
    took = time.perf_counter() - t0
    tqdm.write(f"  history {have:,} → {want:,} rows (with ANALYZE): {took:.1f} s")
    return took


async def _gets(client: httpx.AsyncClient, auths: dict[str, dict[str, str]], runs: list[Any], k: int) -> Any:
    """k sequential GET /runs/{id} of runs drawn from the whole history, each with its tenant's key."""
    times = []
    picks = [random.choice(runs) for _ in range(k + 5)]
    for i, r in enumerate(picks):
        t0 = time.perf_counter()
        resp = await client.get(f"/runs/{r['id']}", headers=auths[r["tenant_id"]])
        elapsed = time.perf_counter() - t0
        resp.raise_for_status()
        if i >= 5:  # the first five warm the connection and the plans
            times.append(elapsed)
    return latency_ms(times)


async def _get_reads(conn: asyncpg.Connection, runs: list[Any]) -> dict[str, float]:
    """What a GET's statement reads, per GET, from EXPLAIN (ANALYZE, BUFFERS) of get_run on runs the
    timed GETs did not touch: pages found in shared buffers, pages asked of the OS (its page cache
    or the disk), and the time those reads took (track_io_timing, where this role may set it)."""
    q = QUERIES["get_run"]
    timing = True
    try:
        await conn.execute("SET track_io_timing = on")
    except asyncpg.PostgresError:
        timing = False
    hit = read = 0
    read_ms = 0.0
    for r in runs:
        lo, hi = scheduled_bounds(r["id"])
        args = q.args({"id": r["id"], "lo": lo, "hi": hi, "tenant_id": r["tenant_id"]})
        [plan] = await conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {q.sql}", *args)
        top = plan["Plan"]
        hit += top.get("Shared Hit Blocks", 0)
        read += top.get("Shared Read Blocks", 0)
        read_ms += top.get("I/O Read Time", 0.0)
    n = max(len(runs), 1)
    return {
        "hit_per_get": hit / n,
        "read_per_get": read / n,
        "read_ms_per_get": read_ms / n if timing else float("nan"),
    }


async def _sample(conn: asyncpg.Connection, pool_settings: Any, samples: int) -> dict[str, Any]:
    s = pool_settings
    bounds = ClaimBounds()
    claim_times, floor_times = [], []
    for i in range(samples + 3):  # the first three warm the plan and the caches
        tr = conn.transaction()
        await tr.start()
        try:
            t0 = time.perf_counter()
            await repo.claim_floor(conn)
            t1 = time.perf_counter()
            rows = await claim_scan(conn, s, bounds)
            t2 = time.perf_counter()
        finally:
            await tr.rollback()
        if i >= 3:
            floor_times.append(t1 - t0)
            claim_times.append(t2 - t1)
    return {
        "claim": latency_ms(claim_times),
        "claim_floor": latency_ms(floor_times),
        "rows_per_batch": len(rows),
    }


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    report = await begin(bench, NAME)
    pending = sized(args.pending, full=5_000, smoke=500, is_smoke=bench.smoke)
    top = sized(args.max_history, full=1_000_000, smoke=100_000, is_smoke=bench.smoke)
    samples = sized(args.samples, full=50, smoke=10, is_smoke=bench.smoke)
    gets = sized(args.gets, full=500, smoke=50, is_smoke=bench.smoke)
    args.days = sized(args.days, full=365, smoke=20, is_smoke=bench.smoke)
    steps = points(top)
    free = shutil.disk_usage(bench.logs).free
    print(
        f"  free disk under the bench's temp dir: {free / 1e9:.0f} GB (~350 bytes per history row)",
        flush=True,
    )
    results: list[dict[str, Any]] = []
    async with bench.database() as url:
        s = bench.settings(url, engine="off", port=free_port())
        api = SchedulerProcess("api", s, bench.logs)
        report.workload = {
            "pending runs (held equal)": pending,
            "history points": " → ".join(f"{p:,}" for p in steps),
            "history": f"succeeded runs over {args.days} past daily partitions, written into the partitions",
            "tenants": args.tenants,
            "batch_size": s.batch_size,
            "claim samples per point": samples,
            "GETs per point": f"{gets}, sequential, one scheduler api process (engine off)",
            "isolation": "each claim rolled back; ANALYZE after each growth step (no VACUUM)",
        }
        pool = await create_pool(url, min_size=1, max_size=2, name="bench-history")
        try:
            async with running([api]), httpx.AsyncClient(base_url=api.base_url, timeout=30.0) as client:
                auths = {t: await api_tenant(client, t) for t in workload.tenant_ids(args.tenants)}
                async with pool.acquire() as conn:
                    now: datetime = await workload.fetchval(conn, "clock")
                    today = datetime(now.year, now.month, now.day, tzinfo=UTC)
                    await workload.standing_backlog(conn, pending, args.tenants, spread_seconds=120.0)
                    have = 0
                    for point in steps:
                        took = await _grow(conn, have, point, args, today)
                        have = point
                        partitions, size = await history_data.size(conn)
                        r = await _sample(conn, s, samples)
                        runs = await history_data.sample_ids(conn, have, min(2_000, have))
                        timed, probed = runs[: len(runs) // 2], runs[len(runs) // 2 :][:200]
                        r["get"] = await _gets(client, auths, timed, gets)
                        r["get_reads"] = await _get_reads(conn, probed)
                        results.append(
                            {
                                "history": point,
                                "partitions": partitions,
                                "bytes": size,
                                "grow_seconds": took,
                                **r,
                            }
                        )
        finally:
            await pool.close()
    _figures(report, results, pending)
    return report


def _figures(report: Report, results: list[dict[str, Any]], pending: int) -> None:
    report.table(
        f"Claim latency with {pending:,} pending runs as history grows (ms)",
        [
            "history rows",
            "partitions",
            "job_runs size MB",
            "claim p50",
            "claim p95",
            "claim p99",
            "claim_floor p50",
            "rows/batch",
        ],
        [
            [
                r["history"],
                r["partitions"],
                r["bytes"] / 1e6,
                r["claim"]["p50_ms"],
                r["claim"]["p95_ms"],
                r["claim"]["p99_ms"],
                r["claim_floor"]["p50_ms"],
                r["rows_per_batch"],
            ]
            for r in results
        ],
    )
    report.table(
        "GET /runs/{id} of a run drawn from the whole history, through the API (ms); time to write it",
        [
            "history rows",
            "GET p50",
            "GET p95",
            "GET p99",
            "GET max",
            "pages hit / GET",
            "pages read / GET",
            "read ms / GET",
            "seconds to grow (+ ANALYZE)",
        ],
        [
            [
                r["history"],
                r["get"]["p50_ms"],
                r["get"]["p95_ms"],
                r["get"]["p99_ms"],
                r["get"]["max_ms"],
                r["get_reads"]["hit_per_get"],
                r["get_reads"]["read_per_get"],
                r["get_reads"]["read_ms_per_get"],
                r["grow_seconds"],
            ]
            for r in results
        ],
    )
    first, last = results[0], results[-1]
    at = f"at {last['history']:,} / at {first['history']:,} history rows"
    report.target(f"claim p50 {at}", last["claim"]["p50_ms"] / first["claim"]["p50_ms"], "<=", 1.5, "x")
    for q in ("p50", "p99"):
        key = f"{q}_ms"
        report.target(f"GET /runs/{{id}} {q} {at}", last["get"][key] / first["get"][key], "<=", 1.5, "x")
    report.notes.append(
        "claim = reading the partition bounds (cached for a second, as in the dispatcher) + claim_due_runs, "
        "a real claim rolled back. claim_floor (the dispatcher's once-a-second bounds read) is timed on its "
        "own: it probes the live-runs partial index of every partition, so it is the part that grows with "
        "the number of partitions, not with rows."
    )
    report.notes.append(
        "pages hit / read per GET: EXPLAIN (ANALYZE, BUFFERS) of the GET's statement (get_run) on up to 200 "
        "other runs of the sample, after the timed GETs: pages found in shared buffers, and pages asked of "
        "the OS (its page cache or the disk), with the time those reads took (track_io_timing). A history "
        "larger than the host's memory makes reads, and the reads make the GET's tail."
    )
    report.data = {"points": results}
    report.draw = lambda fig: _chart(fig, results)
    report.not_mean = (
        "History here is synthetic: uniform, all succeeded, in past partitions only, freshly written with "
        "indexes built in bulk and ANALYZEd (not VACUUMed), so the figures show whether the claim's plan and "
        "a GET stay independent of history (partition pruning, partial indexes, one partition per id), not "
        "how a real, bloated production table behaves; whether the largest point fits in memory shows in "
        "its size against the host's memory. Latencies are of single claims and sequential GETs by one "
        "client with nothing else touching the table. " + shared_host(report, "Postgres")
    )


def _chart(fig: Any, results: list[dict[str, Any]]) -> None:
    ax = fig.add_subplot(1, 1, 1)
    xs = [r["history"] for r in results]
    ax.plot(xs, [r["claim"]["p50_ms"] for r in results], marker="o", label="claim p50")
    ax.plot(xs, [r["claim"]["p95_ms"] for r in results], marker="o", label="claim p95")
    ax.plot(xs, [r["claim_floor"]["p50_ms"] for r in results], marker="s", label="claim_floor p50")
    ax.set_xscale("log")
    ax.set_xlabel("history rows (terminal runs in past partitions)")
    ax.set_ylabel("ms")
    ax.set_ylim(bottom=0)
    ax.set_title("Claim latency as history grows, pending held equal")
    ax.legend()
