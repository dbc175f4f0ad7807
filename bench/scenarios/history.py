"""history: claim latency with the pending set held equal while history grows.

P pending runs (due over the last minutes) stay put; terminal (succeeded) history spread over ≥ 100
past daily partitions grows 10k → 100k → 1M (→ 10M with --max-history 10000000), VACUUM ANALYZE after
each step. Each claim sample is rolled back so pending stays equal. The design's claim: claim cost
tracks pending runs, not history, so p50 at the largest history / p50 at 10k should stay ≤ 1.5."""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from typing import Any

import asyncpg

from app.db import transitions as repo
from app.db.connection import create_pool
from app.engine.dispatcher import claim_scan
from app.engine.floor import ClaimBounds
from bench import workload
from bench.measure import latency_ms
from bench.progress import tqdm
from bench.report import Report
from bench.scenarios._common import begin, shared_host, sized
from bench.stack import Bench

NAME = "history"
HELP = "claim latency with pending held equal while terminal history grows (10k → 1M, or 10M)"
CHUNK = 100_000


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pending", type=int, help="pending runs held equal (default 5000; smoke 500)")
    p.add_argument("--max-history", type=int, help="largest history (default 1000000; smoke 100000)")
    p.add_argument(
        "--days", type=int, help="past daily partitions the history spreads over (default 120; smoke 20)"
    )
    p.add_argument("--tenants", type=int, default=50)
    p.add_argument("--samples", type=int, help="claim samples per point (default 50; smoke 10)")


def points(max_history: int) -> list[int]:
    """10k, 100k, 1M, … up to max_history (which is always the last point)."""
    out, p = [], 10_000
    while p < max_history:
        out.append(p)
        p *= 10
    return [*out, max_history]


async def _grow(
    conn: asyncpg.Connection, have: int, want: int, days: int, tenants: int, today: datetime
) -> None:
    with tqdm(
        total=want - have, desc=f"history → {want:,} rows", unit="row", unit_scale=True, leave=False
    ) as bar:
        while have < want:
            n = min(CHUNK, want - have)
            await workload.insert_history(conn, first=have, n=n, days=days, tenants=tenants, today=today)
            have += n
            bar.update(n)
    t0 = time.perf_counter()
    # No statement timeout: at 10M rows this takes minutes, past the pool's 60 s command timeout.
    await conn.execute("VACUUM (ANALYZE) job_runs", timeout=3600)
    tqdm.write(f"  VACUUM ANALYZE at {want:,} rows: {time.perf_counter() - t0:.1f} s")


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
    days = sized(args.days, full=120, smoke=20, is_smoke=bench.smoke)
    steps = points(top)
    results: list[dict[str, Any]] = []
    async with bench.database() as url:
        s = bench.settings(url)
        report.workload = {
            "pending runs (held equal)": pending,
            "history points": " → ".join(f"{p:,}" for p in steps),
            "history": f"succeeded runs over {days} past daily partitions",
            "tenants": args.tenants,
            "batch_size": s.batch_size,
            "samples per point": samples,
            "isolation": "each claim rolled back; VACUUM ANALYZE after each growth step",
        }
        pool = await create_pool(url, min_size=1, max_size=2, name="bench-history")
        try:
            async with pool.acquire() as conn:
                await workload.seed_tenants(conn, args.tenants)
                now: datetime = await workload.fetchval(conn, "clock")
                today = datetime(now.year, now.month, now.day, tzinfo=UTC)
                await workload.create_past_partitions(conn, today, days)
                await workload.standing_backlog(conn, pending, args.tenants, spread_seconds=120.0)
                have = 0
                for point in steps:
                    await _grow(conn, have, point, days, args.tenants, today)
                    have = point
                    partitions, size = await workload.history_size(conn)
                    r = await _sample(conn, s, samples)
                    results.append({"history": point, "partitions": partitions, "bytes": size, **r})
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
    first, last = results[0], results[-1]
    ratio = last["claim"]["p50_ms"] / first["claim"]["p50_ms"]
    report.target(
        f"claim p50 at {last['history']:,} / at {first['history']:,} history rows", ratio, "<=", 1.5, "x"
    )
    report.notes.append(
        "claim = reading the partition bounds (cached for a second, as in the dispatcher) + claim_due_runs, "
        "a real claim rolled back. claim_floor (the dispatcher's once-a-second bounds read) is timed on its "
        "own: it probes the live-runs partial index of every partition, so it is the part that grows with "
        "the number of partitions, not with rows."
    )
    report.data = {"points": results}
    report.draw = lambda fig: _chart(fig, results)
    report.not_mean = (
        "History here is synthetic: uniform, all succeeded, in past partitions only, freshly VACUUMed and "
        "ANALYZEd, on a database that fits in this machine's memory, so the figures show whether the claim's "
        "plan stays independent of history (partition pruning, partial indexes), not how a real, bloated, "
        "partly cold production table behaves; and 10M rows (if run) is still a tenth of the design target. "
        "Latencies are of single claims by one client with nothing else touching the table. "
        + shared_host(report, "Postgres")
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
