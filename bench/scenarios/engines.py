"""engines: 1, 2 and 4 concurrent `scheduler engine` processes draining the same backlog to
JetStream (publish only, no worker: the engines' count of acked runs says when it is done), with and
without the Redis hot index (SCHEDULER_HOT_INDEX=redis, the index seeded with the backlog).

Each configuration gets a fresh identical backlog, a stream of its own and fresh processes, started
and ready before the backlog falls due. Afterwards: the stream must carry exactly N distinct runs
and every run must have been claimed exactly once (epoch 1) — nothing published twice, nothing lost."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import redis.asyncio as aioredis

from app.bus.jetstream import ensure_stream
from app.db.connection import create_pool
from bench import workload
from bench.measure import Metrics, rate, wait_for_count
from bench.procs import ops_process, running, scrape_all
from bench.report import Report
from bench.scenarios._common import add_backlog_arguments, begin, engine_summary, shared_host, sized
from bench.stack import Bench, delete_stream, stream_runs

NAME = "engines"
HELP = (
    "1, 2, 4 engine processes on one backlog, scan vs Redis hot index (runs/s, claim latency, no duplicates)"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=int, help="backlog per configuration (default 20000; smoke 1000)")
    p.add_argument("--engines", default=None, help="comma-separated engine counts (default 1,2,4; smoke 1,2)")
    add_backlog_arguments(p)


async def published(procs: Any) -> int:
    """Runs the engines saw acked, from their /metrics (a message carries several runs, so the
    stream's message count does not say when all are out)."""
    return int(sum(m.value("scheduler_runs_published_total") for m in await scrape_all(procs)))


class Runner:
    def __init__(
        self, bench: Bench, url: str, pool: Any, nc: Any, redis: Any, args: argparse.Namespace, n: int
    ):
        self.bench, self.url, self.pool, self.nc, self.redis = bench, url, pool, nc, redis
        self.n, self.tenants, self.timeout, self.analyze = n, args.tenants, args.timeout, args.analyze

    async def configuration(self, k: int, hot: bool) -> dict[str, Any]:
        base = self.bench.settings(self.url, hot_index="redis" if hot else "off")
        key = f"{base.stream}:due"  # the key the engines' HotIndex uses
        procs = [ops_process("engine", base, self.bench.logs, name=f"engine{i}") for i in range(k)]
        label = f"{k} engine{'s' if k > 1 else ''}, {'hot index' if hot else 'scan'}"
        async with self.pool.acquire() as conn:
            await workload.reset_runs(conn)
        await ensure_stream(self.nc.jetstream(), base)
        try:
            async with running(procs):
                before = await scrape_all(procs)
                async with self.pool.acquire() as conn:
                    due_at, start = await workload.due_burst(
                        conn, self.n, self.tenants, 0.5 + self.n / 10_000, analyze=self.analyze
                    )
                    if hot:
                        await workload.seed_hot_index(conn, self.redis, key)
                    await workload.wake_at(conn, start, due_at)
                done = await wait_for_count(
                    lambda: published(procs),
                    self.n,
                    desc=label,
                    interval=0.05,
                    timeout=self.timeout,
                )
                after = await scrape_all(procs)
                await asyncio.sleep(0.5)  # a duplicate publish would land in the stream by now
                carried = await stream_runs(self.nc, base.stream)
                stored = len(carried) if len(set(carried)) == len(carried) else -len(carried)
            async with self.pool.acquire() as conn:
                counts = await workload.status_counts(conn)
                db_span = float(await workload.fetchval(conn, "dispatch_span"))
        finally:
            await delete_stream(self.nc, base)
            await self.redis.delete(key)
        diffs = [a - b for a, b in zip(after, before, strict=True)]
        total = sum(diffs, Metrics())
        return {
            "label": label,
            "engines": k,
            "hot": hot,
            "seconds": done - start,
            "db_seconds": db_span,
            "stored": stored,
            "status_counts": counts,
            "summary": engine_summary(total),
            "per_engine_claimed": [d.value("scheduler_runs_claimed_total") for d in diffs],
        }


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    report = await begin(bench, NAME, redis=True)
    n = sized(args.runs, full=20_000, smoke=1_000, is_smoke=bench.smoke)
    counts = [int(x) for x in (args.engines or ("1,2" if bench.smoke else "1,2,4")).split(",")]
    results: list[dict[str, Any]] = []
    async with bench.database() as url:
        base = bench.settings(url)
        report.workload = {
            "backlog per configuration": n,
            "tenants": args.tenants,
            "engine counts": ",".join(map(str, counts)),
            "batch_size": base.batch_size,
            "dispatch_batches_in_flight": base.dispatch_batches_in_flight,
            "consumers": "none (publish only)",
            "completion": "the engines' scheduler_runs_published_total, scraped every 50 ms",
            "statistics": "ANALYZE with the backlog" if args.analyze else "none (--no-analyze)",
        }
        pool = await create_pool(url, min_size=1, max_size=2, name="bench-engines")
        nc = await bench.nats()
        redis: Any = aioredis.from_url(bench.services.redis_url)
        try:
            async with pool.acquire() as conn:
                await workload.seed_tenants(conn, args.tenants)
            runner = Runner(bench, url, pool, nc, redis, args, n)
            for k in counts:
                for hot in (False, True):
                    results.append(await runner.configuration(k, hot))
        finally:
            await redis.aclose()
            await nc.close()
            await pool.close()
    _figures(report, results, n)
    return report


def _figures(report: Report, results: list[dict[str, Any]], n: int) -> None:
    rows = []
    for r in results:
        s = r["summary"]
        claimed_twice = sum(v[1] for v in r["status_counts"].values())
        rows.append(
            [
                r["label"],
                r["seconds"],
                rate(n, r["seconds"]),
                rate(n, r["db_seconds"]),
                s["claim_p50_ms"],
                s["claim_p95_ms"],
                s["claims"],
                f"{s['claims_hot']:.0f} / {s['claims_scan']:.0f}",
                " / ".join(f"{x:.0f}" for x in r["per_engine_claimed"]),
                r["stored"],
                claimed_twice,
            ]
        )
        if r["stored"] != n or claimed_twice or r["status_counts"].get("dispatched", (0, 0))[0] != n:
            report.notes.append(
                f"{r['label']}: stream carries {r['stored']} runs (negative: some twice), runs by status "
                f"{r['status_counts']}"
            )
    report.table(
        "Concurrent engines draining one backlog (publish only)",
        [
            "configuration",
            "seconds",
            "runs/s",
            "runs/s (DB: last claim)",
            "claim p50 ms",
            "claim p95 ms",
            "claims",
            "hot / scan claims",
            "runs claimed per engine",
            "runs in stream",
            "claimed > once",
        ],
        rows,
    )
    scan1 = next((rate(n, r["seconds"]) for r in results if r["engines"] == 1 and not r["hot"]), float("nan"))
    report.table(
        "Scaling",
        ["configuration", "runs/s", "x 1 engine (scan)"],
        [[r["label"], rate(n, r["seconds"]), rate(n, r["seconds"]) / scan1] for r in results],
    )
    duplicates = [r["label"] for r in results if r["stored"] != n]
    report.notes.append(
        "No run was published twice: every stream carried exactly N distinct runs and every run has epoch 1."
        if not duplicates and not any("stream carries" in x for x in report.notes)
        else f"duplicates or losses in: {', '.join(duplicates) or 'see above'}"
    )
    report.notes.append(
        "Claim latency comes from the engines' scheduler_claim_duration_seconds histograms (diffed over the "
        "drain, summed over engines; quantiles interpolated in Prometheus's buckets, so coarse), and counts "
        "every claim statement, empty ones included. The hot path's figure includes its Redis pop."
    )
    report.data = {"configurations": results}
    report.draw = lambda fig: _chart(fig, results, n)
    report.not_mean = (
        "Here 'more engines' means more processes on the same 2 cores as Postgres and NATS, so the figures "
        "show contention for this machine's CPU at least as much as SKIP LOCKED contention between claimers: "
        "they say nothing about engines on machines of their own, which is where adding replicas would help "
        "or not. Publish only (nothing consumes the stream), noop runs, one burst of N runs due at once. "
        "The hot-index rows measure this implementation of the hint on this Redis, not Redis in general. "
        + shared_host(report, "Postgres, NATS, Redis and every engine process")
    )


def _chart(fig: Any, results: list[dict[str, Any]], n: int) -> None:
    ax = fig.add_subplot(1, 1, 1)
    ks = sorted({r["engines"] for r in results})
    for j, hot in enumerate((False, True)):
        ys = [
            next((rate(n, r["seconds"]) for r in results if r["engines"] == k and r["hot"] == hot), 0.0)
            for k in ks
        ]
        ax.bar([i + j * 0.4 for i in range(len(ks))], ys, 0.4, label="hot index" if hot else "scan")
    ax.set_xticks([i + 0.2 for i in range(len(ks))], [f"{k} engine{'s' if k > 1 else ''}" for k in ks])
    ax.set_ylabel("runs/s (published)")
    ax.set_title("Concurrent engines draining one backlog")
    ax.legend()
