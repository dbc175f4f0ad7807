"""dispatch (engine only, in this process): drain a standing backlog to JetStream four ways, in one run
against the same Postgres and NATS, each from a fresh identical backlog onto a stream of its own:

  sync baseline   claim a batch, then `await js.publish` each message (one round trip per message);
  sequential      stack.dispatch.dispatch_once in a loop (claim -> pipelined publish -> settle, no overlap);
  overlapped      the real loop, Dispatcher.run(stop), done when every run was acked;
  raw             publish_async of the very same messages with no database at all.

All four run in each round (in rotating order, against drift on a noisy machine); the median
round of each is reported, every round listed.

Phase shares come from scheduler_dispatch_phase_seconds_total (stack.dispatch: busy seconds per
phase / wall seconds); in the
overlapped loop phases overlap, so they can add up to more than 100%."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from prometheus_client import REGISTRY

from app.bus.jetstream import ensure_stream
from app.bus.message import RunMessage
from app.config import Settings
from app.db.connection import create_pool
from app.engine.claims import claim_scan
from app.engine.dispatcher import Dispatcher
from app.engine.floor import ClaimBounds
from app.telemetry.tracing import setup_tracing
from bench import workload
from bench.measure import rate, wait_for_count
from bench.progress import tqdm
from bench.report import Report
from bench.scenarios._common import begin, shared_host, sized
from bench.stack import Bench, delete_stream, stream_runs
from stack.dispatch import dispatch_once, phase_seconds, phase_seconds_since

NAME = "dispatch"
HELP = "engine-only drain in-process: sync publish baseline vs dispatch_once loop vs overlapped run() vs raw"
PHASES = ("claim", "publish", "settle")
COLUMNS = (
    ["variant", "runs", "seconds", "runs/s", "x sync", "x raw"]
    + [f"{p} % wall" for p in PHASES]
    + ["rounds (runs/s)"]
)
VARIANTS = ("raw publish_async", "sync baseline", "sequential (dispatch_once)", "overlapped (run)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=int, help="standing backlog per variant (default 20000; smoke 1000)")
    p.add_argument("--rounds", type=int, help="rounds of all four variants (default 3; smoke 1)")
    p.add_argument("--tenants", type=int, default=50)
    p.add_argument(
        "--timeout", type=float, default=600.0, help="give up on a variant after this many seconds"
    )


def published_runs() -> int:
    """Runs this process's dispatchers saw acked (their counter: a message carries several runs, so
    the stream's message count does not say when all are out)."""
    return int(REGISTRY.get_sample_value("scheduler_runs_published_total") or 0)


async def published_since(before: int) -> int:
    return published_runs() - before


class Variants:
    def __init__(
        self, bench: Bench, pool: asyncpg.Pool, nc: NATS, url: str, n: int, tenants: int, timeout: float
    ):
        self.bench, self.pool, self.nc, self.url = bench, pool, nc, url
        self.n, self.tenants, self.timeout = n, tenants, timeout
        self.streams: list[Settings] = []

    async def fresh(self) -> tuple[Settings, JetStreamContext]:
        """The same standing backlog again, and a new empty stream for it."""
        s = self.bench.settings(self.url)
        async with self.pool.acquire() as conn:
            await workload.standing_backlog(conn, self.n, self.tenants)
        js = self.nc.jetstream()
        self.streams.append(s)
        await ensure_stream(js, s)
        return s, js

    async def check(self, s: Settings, report: Report, variant: str) -> None:
        runs = await stream_runs(self.nc, s.stream)
        async with self.pool.acquire() as conn:
            counts = await workload.status_counts(conn)
        if len(set(runs)) != self.n or len(runs) != self.n or counts.get("dispatched", (0, 0))[0] != self.n:
            report.notes.append(
                f"{variant}: stream carries {len(runs)} runs ({len(set(runs))} distinct), runs by status "
                f"{counts} (expected {self.n})"
            )
        await delete_stream(self.nc, s)

    async def raw(self) -> dict[str, Any]:
        s, js = await self.fresh()
        async with self.pool.acquire() as conn:
            rows = await workload.fetch(conn, "backlog_as_claimed")
        Dispatcher(s, self.pool, self.nc).batches.outgoing(rows[:100])  # warm-up: first spans, lazy imports
        t0 = time.perf_counter()
        for row in rows:  # each run's entry alone, to tell its cost from the rest of the message
            RunMessage.from_claimed(row).entry()
        encode = time.perf_counter() - t0
        t0 = time.perf_counter()
        built = Dispatcher(s, self.pool, self.nc).batches.outgoing(rows)
        build = time.perf_counter() - t0
        t0 = time.perf_counter()
        futures = [await js.publish_async(m.subject, m.payload, headers=m.headers) for m in built.messages]
        results = await asyncio.gather(*futures, return_exceptions=True)
        elapsed = time.perf_counter() - t0
        ok = sum(n for n, r in zip(built.sizes, results, strict=True) if not isinstance(r, BaseException))
        await delete_stream(self.nc, s)
        return {
            "runs": ok,
            "seconds": elapsed,
            "phases": {},
            "build_us_per_run": build / len(rows) * 1e6,
            "encode_us_per_run": encode / len(rows) * 1e6,
        }

    async def sync_baseline(self, report: Report) -> dict[str, Any]:
        s, js = await self.fresh()
        d = Dispatcher(s, self.pool, self.nc)  # only for outgoing(): the same messages, spans and headers
        bounds = ClaimBounds()
        phases = {"claim": 0.0, "publish": 0.0, "settle": 0.0}
        done = 0
        with tqdm(total=self.n, desc="sync baseline", unit="run", leave=False) as bar:
            t0 = time.perf_counter()
            while True:
                c0 = time.perf_counter()
                async with self.pool.acquire() as conn:
                    rows = await claim_scan(conn, s, bounds)
                c1 = time.perf_counter()
                phases["claim"] += c1 - c0
                if not rows:
                    break
                for m in d.batches.outgoing(rows).messages:
                    await js.publish(m.subject, m.payload, headers=m.headers)
                phases["publish"] += time.perf_counter() - c1
                done += len(rows)
                bar.update(len(rows))
            elapsed = time.perf_counter() - t0
        await self.check(s, report, "sync baseline")
        return {"runs": done, "seconds": elapsed, "phases": phases}

    async def sequential(self, report: Report) -> dict[str, Any]:
        s, _ = await self.fresh()
        d = Dispatcher(s, self.pool, self.nc)
        done = 0
        phases_before = phase_seconds()
        with tqdm(total=self.n, desc="sequential dispatch_once", unit="run", leave=False) as bar:
            t0 = time.perf_counter()
            while claimed := await dispatch_once(d):
                done += claimed
                bar.update(claimed)
            elapsed = time.perf_counter() - t0
        await self.check(s, report, "sequential")
        return {"runs": done, "seconds": elapsed, "phases": phase_seconds_since(phases_before)}

    async def overlapped(self, report: Report) -> dict[str, Any]:
        s, _ = await self.fresh()
        d = Dispatcher(s, self.pool, self.nc)
        stop = asyncio.Event()
        published_before = published_runs()
        phases_before = phase_seconds()
        t0 = time.perf_counter()
        task = asyncio.create_task(d.run(stop))
        try:
            t_done = await wait_for_count(
                lambda: published_since(published_before),
                self.n,
                desc="overlapped run()",
                interval=0.01,
                timeout=self.timeout,
            )
        finally:
            stop.set()
            await task
        phases = phase_seconds_since(phases_before)
        await self.check(s, report, "overlapped")
        return {"runs": self.n, "seconds": t_done - t0, "phases": phases}


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    report = await begin(bench, NAME)
    n = sized(args.runs, full=20_000, smoke=1_000, is_smoke=bench.smoke)
    # The real engine process installs the SDK tracer provider; so does this one, so the dispatch
    # spans cost here what they cost there (no exporter unless OTEL_EXPORTER_OTLP_ENDPOINT is set).
    setup_tracing("scheduler-bench")
    rounds = sized(args.rounds, full=3, smoke=1, is_smoke=bench.smoke)
    per: dict[str, list[dict[str, Any]]] = {name: [] for name in VARIANTS}
    async with bench.database() as url:
        s = bench.settings(url)
        report.workload = {
            "standing backlog per variant": n,
            "rounds": f"{rounds} (variants in rotating order; the median round is shown)",
            "tenants": args.tenants,
            "batch_size": s.batch_size,
            "per_tenant_cap": s.per_tenant_cap,
            "dispatch_batches_in_flight": s.dispatch_batches_in_flight,
            "engine": "Dispatcher in the bench process (one event loop, no reaper/cron/maintenance)",
        }
        pool = await create_pool(
            url, min_size=2, max_size=s.dispatch_batches_in_flight + 4, name="bench-dispatch"
        )
        nc = await bench.nats()
        v = Variants(bench, pool, nc, url, n, args.tenants, args.timeout)
        steps: dict[str, Callable[[], Awaitable[dict[str, Any]]]] = {
            "raw publish_async": v.raw,
            "sync baseline": lambda: v.sync_baseline(report),
            "sequential (dispatch_once)": lambda: v.sequential(report),
            "overlapped (run)": lambda: v.overlapped(report),
        }
        try:
            async with pool.acquire() as conn:
                await workload.seed_tenants(conn, args.tenants)
            for r in range(rounds):
                order = VARIANTS[r % len(VARIANTS) :] + VARIANTS[: r % len(VARIANTS)]
                for name in order:
                    per[name].append(await steps[name]())
        finally:
            for used in v.streams:
                await delete_stream(nc, used)
            await nc.close()
            await pool.close()
    _figures(report, per)
    return report


def _median_round(results: list[dict[str, Any]]) -> dict[str, Any]:
    ordered = sorted(results, key=lambda r: rate(r["runs"], r["seconds"]))
    return ordered[(len(ordered) - 1) // 2]


def _figures(report: Report, per: dict[str, list[dict[str, Any]]]) -> None:
    out = {name: _median_round(results) for name, results in per.items()}
    all_rates = {name: [rate(r["runs"], r["seconds"]) for r in results] for name, results in per.items()}
    rates = {k: rate(v["runs"], v["seconds"]) for k, v in out.items()}
    sync, raw = rates["sync baseline"], rates["raw publish_async"]
    rows = []
    for name, r in out.items():
        shares = [
            r["phases"].get(p, 0.0) / r["seconds"] * 100 if r["phases"] else float("nan") for p in PHASES
        ]
        rounds = " / ".join(f"{x:,.0f}" for x in all_rates[name])
        row = [name, r["runs"], r["seconds"], rates[name], rates[name] / sync, rates[name] / raw]
        rows.append([*row, *shares, rounds])
    report.table("Drain of a standing backlog to JetStream", COLUMNS, rows)
    overlapped = rates["overlapped (run)"]
    report.target("overlapped run() vs sync baseline", overlapped / sync, ">=", 3.0, "x")
    report.target("overlapped run() vs raw publish_async", overlapped / raw, ">=", 0.6, "x")
    report.notes.append(
        "Each row is the variant's median round (the lower middle one for an even count); 'rounds' lists "
        "every round, so its spread is this machine's noise. Building the messages is not in the raw "
        "figure; it is in every drain's publish phase. The overlapped loop's end is seen by polling "
        "stream_info every 20 ms from the same event loop (a small cost the other variants do not pay)."
    )
    build = out["raw publish_async"]
    n_built, overlapped_s = build["runs"], out["overlapped (run)"]["seconds"]
    parts = {
        "whole (entry, traceparent, grouping into messages)": build["build_us_per_run"],
        "the run's entry only (RunMessage.entry)": build["encode_us_per_run"],
        "the rest (traceparent, a span only when recorded; grouping)": build["build_us_per_run"]
        - build["encode_us_per_run"],
    }
    report.table(
        "CPU cost of building one run's message (Batches.outgoing), in this process",
        ["part", "us per run", f"x {n_built:,} runs = s", "% of overlapped wall"],
        [[k, us, us * n_built / 1e6, us * n_built / 1e6 / overlapped_s * 100] for k, us in parts.items()],
    )
    report.notes.append(
        "Phase % of wall: busy seconds of each phase over the variant's wall time. The sync baseline's "
        "publish is one `await js.publish` per run; the dispatcher's publish is handing the batch to NATS "
        "plus waiting for its PubAcks; settle is releasing unacked runs (0 when every publish is acked). In "
        "the overlapped loop a batch's PubAck wait runs beside the next claim, so shares can add up to more "
        "than 100%."
    )
    report.data = {"rounds": per, "median_rates": rates}
    report.draw = lambda fig: _chart(fig, out, rates)
    report.not_mean = (
        "These figures drain a backlog that is already due, as fast as one engine in one Python process can, "
        "with nothing consuming the stream: they are the engine's half only (no worker, no execution, no "
        "outcome writes, see `drain`), for one engine (see `engines`), at the app's default batch size and "
        "batches in flight. The raw figure is one client's publish rate over loopback, not NATS's ceiling. "
        "The ratios are the point; the absolute runs/s would differ on any other machine or day. "
        + shared_host(report, "Postgres and NATS")
    )


def _chart(fig: Any, out: dict[str, dict[str, Any]], rates: dict[str, float]) -> None:
    names = list(out)
    left = fig.add_subplot(1, 2, 1)
    left.bar(range(len(names)), [rates[n] for n in names], color=["#999999", "#4c72b0", "#55a868", "#c44e52"])
    left.set_xticks(range(len(names)), [n.replace(" (", "\n(") for n in names], fontsize=8)
    left.set_ylabel("runs/s")
    left.set_title("Drain rate")
    right = fig.add_subplot(1, 2, 2)
    drains = [n for n in names if out[n]["phases"]]
    bottom = [0.0] * len(drains)
    for phase, color in zip(PHASES, ("#dd8452", "#4c72b0", "#8172b3"), strict=True):
        shares = [out[n]["phases"].get(phase, 0.0) / out[n]["seconds"] * 100 for n in drains]
        right.bar(range(len(drains)), shares, bottom=bottom, label=phase, color=color)
        bottom = [b + x for b, x in zip(bottom, shares, strict=True)]
    right.set_xticks(range(len(drains)), [n.replace(" (", "\n(") for n in drains], fontsize=8)
    right.set_ylim(0, max([100.0, *bottom]) * 1.3)  # room for the legend above the bars
    right.set_ylabel("% of wall time (busy)")
    right.set_title("Phase share of the loop")
    right.legend(loc="upper left", ncols=3, fontsize=8)
