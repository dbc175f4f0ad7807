"""claim: the cost of one claim, nothing published — the scan (claim_due_runs), the plain
ROW_NUMBER form (claim_due_runs_ranked, which only selects; timed as the same-sized select) and the
Redis hot index (HotIndex.pop_due + claim_hinted_runs) — on a small and a large standing backlog.

Every sample runs in a transaction that is rolled back, and popped hints are put back, so every
sample sees the same backlog (the drain case is the dispatch/engines scenarios' job). Samples of the
three methods are interleaved, in rotating order, so drift on a noisy machine hits all of them."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

import asyncpg

from app.bus.hot_index import HotIndex
from app.config import Settings
from app.db.connection import create_pool
from app.engine.claims import claim_hinted, claim_scan
from app.engine.floor import ClaimBounds
from bench import workload
from bench.measure import latency_ms
from bench.progress import tqdm
from bench.report import Report
from bench.scenarios._common import begin, shared_host, sized
from bench.stack import Bench
from stack.reference import claim_due_runs_ranked

NAME = "claim"
HELP = "claim latency per batch: scan vs ROW_NUMBER form vs Redis hot index, 1k vs 100k backlog"
METHODS = ("scan", "ranked (select only)", "hot index")
Sample = Callable[[asyncpg.Connection], Awaitable[tuple[float, int]]]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=int, help="large backlog (default 100000; smoke 2000)")
    p.add_argument("--small", type=int, help="small backlog (default 1000; smoke 200)")
    p.add_argument("--tenants", type=int, default=50)
    p.add_argument("--samples", type=int, help="samples per method and backlog (default 50; smoke 10)")


class Methods:
    """The three ways to claim one batch; each returns (seconds, rows) and leaves the backlog as it was."""

    def __init__(self, settings: Settings, hot: HotIndex, scores: dict[UUID, float]):
        self.s = settings
        self.hot = hot
        self.scores = scores
        self.bounds = ClaimBounds()  # floor re-read every second, as the dispatcher does

    async def scan(self, conn: asyncpg.Connection) -> tuple[float, int]:
        s = self.s
        t0 = time.perf_counter()
        rows = await claim_scan(conn, s, self.bounds)
        return time.perf_counter() - t0, len(rows)

    async def ranked(self, conn: asyncpg.Connection) -> tuple[float, int]:
        s = self.s
        t0 = time.perf_counter()
        floor, ceiling = await self.bounds.get(conn)
        rows = await claim_due_runs_ranked(
            conn, floor=floor, ceiling=ceiling, per_tenant_cap=s.per_tenant_cap, batch_size=s.batch_size
        )
        return time.perf_counter() - t0, len(rows)

    async def hot_index(self, conn: asyncpg.Connection) -> tuple[float, int]:
        s = self.s
        t0 = time.perf_counter()
        ids = await self.hot.pop_due(time.time(), s.batch_size)
        rows = await claim_hinted(conn, s, self.bounds, ids) if ids else []
        elapsed = time.perf_counter() - t0
        if ids:  # put the hints back (untimed): the next sample must see the same index
            await self.hot.client.zadd(self.hot.key, {str(i): self.scores[i] for i in ids})
        return elapsed, len(rows)


async def _rolled_back(conn: asyncpg.Connection, sample: Sample) -> tuple[float, int]:
    tr = conn.transaction()
    await tr.start()
    try:
        return await sample(conn)
    finally:
        await tr.rollback()


async def _measure(conn: asyncpg.Connection, methods: Methods, samples: int, label: str) -> dict[str, Any]:
    fns: list[tuple[str, Sample]] = list(
        zip(METHODS, (methods.scan, methods.ranked, methods.hot_index), strict=True)
    )
    for _, fn in fns:  # warm-up: plans, caches, hint bits
        for _ in range(3):
            await _rolled_back(conn, fn)
    times: dict[str, list[float]] = {m: [] for m in METHODS}
    rows: dict[str, list[int]] = {m: [] for m in METHODS}
    for i in tqdm(range(samples), desc=f"claim samples, backlog {label}", leave=False):
        for name, fn in fns[i % 3 :] + fns[: i % 3]:
            elapsed, n = await _rolled_back(conn, fn)
            times[name].append(elapsed)
            rows[name].append(n)
    return {m: {**latency_ms(times[m]), "rows_per_batch": statistics.mean(rows[m])} for m in METHODS}


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    report = await begin(bench, NAME, redis=True)
    large = sized(args.runs, full=100_000, smoke=2_000, is_smoke=bench.smoke)
    small = sized(args.small, full=1_000, smoke=200, is_smoke=bench.smoke)
    samples = sized(args.samples, full=50, smoke=10, is_smoke=bench.smoke)
    results: dict[int, dict[str, Any]] = {}
    async with bench.database() as url:
        s = bench.settings(url)
        report.workload = {
            "backlogs": f"{small:,} and {large:,} due pending runs",
            "tenants": args.tenants,
            "batch_size": s.batch_size,
            "per_tenant_cap": s.per_tenant_cap,
            "samples per method and backlog": samples,
            "isolation": "each sample rolled back (hints put back): every sample sees the same backlog",
        }
        pool = await create_pool(url, min_size=1, max_size=2, name="bench-claim")
        hot = HotIndex(s.redis_url or bench.services.redis_url, f"{s.stream}:due")
        try:
            async with pool.acquire() as conn:
                await workload.seed_tenants(conn, args.tenants)
                for backlog in (small, large):
                    await workload.standing_backlog(conn, backlog, args.tenants)
                    await hot.client.delete(hot.key)
                    await workload.seed_hot_index(conn, hot.client, hot.key)
                    scores = {
                        r["id"]: r["due_at"].timestamp() for r in await workload.fetch(conn, "pending_hints")
                    }
                    results[backlog] = await _measure(conn, Methods(s, hot, scores), samples, f"{backlog:,}")
        finally:
            await hot.client.delete(hot.key)
            await hot.close()
            await pool.close()
    _tables(report, results, small, large)
    return report


def _tables(report: Report, results: dict[int, dict[str, Any]], small: int, large: int) -> None:
    report.table(
        "Claim latency per batch (ms)",
        ["backlog", "method", "p50", "p95", "p99", "max", "rows/batch"],
        [
            [f"{b:,}", m, r["p50_ms"], r["p95_ms"], r["p99_ms"], r["max_ms"], r["rows_per_batch"]]
            for b, per in results.items()
            for m, r in per.items()
        ],
    )
    report.table(
        f"{large:,} vs {small:,} backlog",
        ["method", f"p50 at {small:,}", f"p50 at {large:,}", "ratio (large/small)", "p50 vs scan (large)"],
        [
            [
                m,
                results[small][m]["p50_ms"],
                results[large][m]["p50_ms"],
                results[large][m]["p50_ms"] / results[small][m]["p50_ms"],
                results[large][m]["p50_ms"] / results[large]["scan"]["p50_ms"],
            ]
            for m in METHODS
        ],
    )
    report.data = {"results": {str(k): v for k, v in results.items()}}
    report.notes.append(
        "scan and hot index time a real claim (locks + UPDATE to dispatched) then roll it back; the ranked "
        "form only selects (it claims nothing), so it is cheaper than a claim built on it would be. The scan "
        "includes reading its partition bounds (once a second), the hot index its Redis round trip."
    )
    report.notes.append(
        "Rolled-back claims leave dead row versions behind (batch_size per sample); autovacuum may run "
        "during the samples. Tenants are round-robin, so the scan's fair path (one tenant over its cap) is "
        "not exercised."
    )
    report.draw = lambda fig: _chart(fig, results)
    report.not_mean = (
        "These are latencies of one claim statement on an otherwise idle database, one claimer, backlogs "
        "spread over minutes in one or two daily partitions, all of it in the page cache: they do not show "
        "SKIP LOCKED contention between engines (see `engines`), a cold cache, or a backlog that does not "
        "fit in memory. They compare the three methods with each other on this machine; they do not say how "
        "the claim behaves in a loop where publishing dominates (see `dispatch`). "
        + shared_host(report, "Postgres and Redis")
    )


def _chart(fig: Any, results: dict[int, dict[str, Any]]) -> None:
    ax = fig.add_subplot(1, 1, 1)
    backlogs = list(results)
    width = 0.8 / len(METHODS)
    for j, m in enumerate(METHODS):
        xs = [i + j * width for i in range(len(backlogs))]
        p50 = [results[b][m]["p50_ms"] for b in backlogs]
        p95 = [results[b][m]["p95_ms"] for b in backlogs]
        ax.bar(xs, p50, width, label=f"{m} p50")
        ax.scatter(xs, p95, marker="_", s=300, color="black")
    ax.set_xticks([i + width for i in range(len(backlogs))], [f"{b:,} due runs" for b in backlogs])
    ax.set_ylabel("ms per batch (bar p50, dash p95)")
    ax.set_title("Claim latency per batch")
    ax.legend()
