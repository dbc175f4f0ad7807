"""slow-target (end to end): N runs to a local webhook that answers after D seconds, drained by W
worker processes of concurrency C behind E engines (one by default), with an API process (ENGINE=off) —
the everyday case where the tenants' endpoints, not our CPU, set the pace.

It counts what a slow drain must not cost: claims per run (each claim bumps the epoch, so sum(epoch)
/ N), dispatched runs the reaper put back to pending, and deliveries the epoch fence dropped at start.
Every second it samples the backlog (due pending in Postgres, waiting and delivered in the stream)
and, when a `prometheus` binary is installed (Debian: `apt-get install prometheus`), has a real
Prometheus scrape the three processes and evaluates every scaling query and alert rule of k8s/ —
so the chart shows which tier each signal would scale while the workers bind, and how fast it falls
once the backlog is gone. The dispatch lease is shortened (default 10 s) so that the churn of a
queue that outlives the lease shows within a short run."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from nats.aio.client import Client as NATS
from starlette.requests import Request
from starlette.responses import Response

from app.db.connection import create_pool
from app.db.queries import parse
from app.dev import free_port
from app.services import flow
from app.services.audit import Actor, AuditContext, new_request_id
from bench import prometheus, workload
from bench.procs import SchedulerProcess, ops_process, running
from bench.report import Report
from bench.scenarios._common import begin, loopback_hook, shared_host, sized
from bench.stack import Bench, delete_stream

NAME = "slow-target"
HELP = "N runs to a webhook answering after D s, W workers x C: claims per run, reaps, scaling signals"
PS = [0.5, 0.95, 0.99]
SCRAPE_SECONDS = 1.0

SQL = parse(r"""
-- name: sample
-- The backlog as Postgres holds it, and the claims made so far (every claim bumps the epoch once).
SELECT count(*) FILTER (WHERE status = 'pending' AND due_at <= now()) AS due_pending,
       count(*) FILTER (WHERE status = 'dispatched') AS dispatched,
       count(*) FILTER (WHERE status = 'running') AS running,
       count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
       COALESCE(sum(epoch), 0) AS claims
FROM job_runs;
""")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=int, help="runs (default 1000; smoke 60)")
    p.add_argument("--delay", type=float, help="seconds the target takes to answer (default 1; smoke 0.2)")
    p.add_argument("--engines", type=int, default=1, help="engine processes (default 1)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--concurrency", type=int, help="targets one worker runs at once (default 32; smoke 8)")
    p.add_argument("--lease", type=float, help="SCHEDULER_DISPATCH_LEASE_SECONDS (default 10; smoke 2)")
    p.add_argument("--tenants", type=int, default=5)
    p.add_argument(
        "--pause-after",
        type=float,
        help="pause every tenant's job this many seconds into the drain, resume PAUSE_FOR s later, and "
        "count what still reached the target (default: no pause)",
    )
    p.add_argument("--pause-for", type=float, default=5.0, help="seconds the jobs stay paused (default 5)")
    p.add_argument("--timeout", type=float, default=600.0)


@contextlib.asynccontextmanager
async def slow_receiver(delay: float) -> AsyncIterator[tuple[str, list[float]]]:
    """A webhook on loopback that answers 200 after `delay` seconds; yields (url, call times)."""
    calls: list[float] = []

    async def hook(request: Request) -> Response:
        await request.body()
        calls.append(time.perf_counter())
        await asyncio.sleep(delay)
        return Response(status_code=200)

    async with loopback_hook(hook) as url:
        yield url, calls


async def _stream(nc: NATS, stream: str, consumer: str) -> tuple[int, int]:
    """(messages no worker has received yet, messages delivered and not yet acked)."""
    try:
        info = await nc.jetstream().consumer_info(stream, consumer, timeout=2)
    except Exception:  # no worker has created the consumer yet
        return 0, 0
    return int(info.num_pending), int(info.num_ack_pending)


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    report = await begin(bench, NAME)
    smoke = bench.smoke
    n = sized(args.runs, full=1000, smoke=60, is_smoke=smoke)
    delay = args.delay if args.delay is not None else (0.2 if smoke else 1.0)
    concurrency = args.concurrency or (8 if smoke else 32)
    lease = args.lease if args.lease is not None else (2.0 if smoke else 10.0)
    queries = prometheus.manifest_queries() if prometheus.binary() else []
    async with bench.database() as url, slow_receiver(delay) as (hook_url, calls):
        base = bench.settings(
            url,
            dispatch_lease_seconds=lease,
            worker_concurrency=concurrency,
            worker_fetch_batch=concurrency,
        )
        target = {"type": "http", "url": hook_url, "method": "POST"}
        engines = [ops_process("engine", base, bench.logs, name=f"engine-{i}") for i in range(args.engines)]
        workers = [ops_process("worker", base, bench.logs, name=f"worker-{i}") for i in range(args.workers)]
        api = SchedulerProcess(
            "api", base.model_copy(update={"port": free_port(), "engine": "off"}), bench.logs
        )
        report.workload = {
            "runs": n,
            "target": f"http on loopback answering after {delay:g} s",
            "processes": f"{args.engines} engine(s), {args.workers} worker(s) x {concurrency} slots, 1 api",
            "worker capacity": f"{args.workers * concurrency / delay:.0f} runs/s",
            "dispatch lease": f"{lease:g} s (shortened so a queue that outlives it shows in a short run)",
            "prometheus": f"scrape every {SCRAPE_SECONDS:g} s"
            if queries
            else "not installed: signals not evaluated",
        }
        pool = await create_pool(url, min_size=1, max_size=2, name="bench-slow")
        nc = await bench.nats()
        samples: list[dict[str, Any]] = []
        try:
            async with pool.acquire() as conn:
                await workload.execute(conn, "seed_tenants", tenants=args.tenants, target=target)
            procs = [api, *engines, *workers]
            async with running(procs), _maybe_prometheus(procs, bool(queries)) as prom:
                async with pool.acquire() as conn:
                    due_at, start = await workload.due_burst(
                        conn, n, args.tenants, 0.5 + n / 10_000, target=target
                    )
                    await workload.wake_at(conn, start, due_at)
                done_at: float | None = None
                deadline = start + args.timeout
                pause = Pause(pool, args.tenants, start, args.pause_after, args.pause_for, calls)
                # Sample until every run succeeded, then a few scrapes more to see the signals fall.
                while (
                    done_at is None
                    or time.perf_counter() - done_at < 4 * SCRAPE_SECONDS + base.reap_interval_seconds
                ):
                    sample = await _sample(pool, nc, base, engines, workers, prom, queries)
                    sample["t"] = time.perf_counter() - start
                    samples.append(sample)
                    await pause.step()
                    if done_at is None and sample["succeeded"] >= n:
                        done_at = time.perf_counter()
                    if time.perf_counter() > deadline:
                        raise TimeoutError(
                            f"slow-target: {sample['succeeded']} of {n} after {args.timeout:.0f}s"
                        )
                    await asyncio.sleep(pause.sleep(1.0))
            async with pool.acquire() as conn:
                lags = (await workload.fetch(conn, "lag_percentiles", ps=PS, tenant=None))[0]
        finally:
            await delete_stream(nc, base)
            await nc.close()
            await pool.close()
    assert done_at is not None
    _figures(report, n, samples, done_at - start, lags, len(calls), queries)
    pause.figures(report)
    return report


class Pause:
    """A pause of every tenant's job mid-drain, as a tenant whose endpoint is drowning would pause
    it (through the API's own service), and what reached the target after it: runs started (from
    Postgres) and calls received. The pause holds pending runs and refuses runs already dispatched
    at their start, so what still arrives is what had started before it."""

    def __init__(
        self, pool: Any, tenants: int, start: float, after: float | None, hold: float, calls: list[float]
    ):
        self.pool, self.tenants, self.calls = pool, tenants, calls
        self.at = None if after is None else start + after
        self.resume_at = None if self.at is None else self.at + hold
        self.paused_at: float | None = None  # perf_counter when every job was paused
        self.db_paused_at: Any = None
        self.dispatched = 0
        self.resumed = False

    def sleep(self, default: float) -> float:
        """Sleep no further than the next pause step."""
        now = time.perf_counter()
        nxt = [t - now for t in (self.at, self.resume_at) if t is not None and t > now]
        return max(0.01, min([default, *nxt]))

    async def _pause_all(self, paused: bool) -> None:
        as_admin = AuditContext(Actor("admin", "admin"), new_request_id())  # what the admin token's pause is
        for i in range(self.tenants):
            await flow.set_job_paused(self.pool, f"t{i:03d}", "noop", paused, audit=as_admin)

    async def step(self) -> None:
        now = time.perf_counter()
        if self.at is not None and self.paused_at is None and now >= self.at:
            async with self.pool.acquire() as conn:
                self.dispatched = await conn.fetchval(
                    "SELECT count(*) FROM job_runs WHERE status = 'dispatched'"
                )
            await self._pause_all(True)
            self.paused_at = time.perf_counter()
            async with self.pool.acquire() as conn:
                self.db_paused_at = await conn.fetchval("SELECT now()")
        elif self.paused_at is not None and not self.resumed and now >= (self.resume_at or 0.0):
            paused_at = self.paused_at
            async with self.pool.acquire() as conn:
                self.started_while_paused = await conn.fetch(
                    "SELECT extract(epoch FROM started_at - $1) AS after FROM job_runs WHERE started_at > $1",
                    self.db_paused_at,
                )
            self.calls_while_paused = [c - paused_at for c in self.calls if c > paused_at]
            await self._pause_all(False)
            self.resumed = True

    def figures(self, report: Report) -> None:
        if not self.resumed:
            return
        starts = sorted(float(r["after"]) for r in self.started_while_paused)
        calls = sorted(self.calls_while_paused)
        report.table(
            "A pause of every job mid-drain (held until resumed)",
            [
                "dispatched at the pause",
                "runs started after it",
                "last start after it (s)",
                "target calls after it",
                "last call after it (s)",
            ],
            [
                [
                    self.dispatched,
                    len(starts),
                    starts[-1] if starts else 0.0,
                    len(calls),
                    calls[-1] if calls else 0.0,
                ]
            ],
        )


@contextlib.asynccontextmanager
async def _maybe_prometheus(
    procs: list[SchedulerProcess], enabled: bool
) -> AsyncIterator[prometheus.Prometheus | None]:
    if not enabled:
        yield None
        return
    targets = [(p.name, f"127.0.0.1:{p.port}") for p in procs]
    async with prometheus.running_prometheus(targets, scrape_interval=SCRAPE_SECONDS) as prom:
        yield prom


async def _sample(
    pool: Any,
    nc: NATS,
    settings: Any,
    engines: list[SchedulerProcess],
    workers: list[SchedulerProcess],
    prom: prometheus.Prometheus | None,
    queries: list[prometheus.Query],
) -> dict[str, Any]:
    async with pool.acquire() as conn:
        sql = SQL["sample"]
        row = await conn.fetchrow(sql.sql, *sql.args({}))
    waiting, delivered = await _stream(nc, settings.stream, settings.consumer)
    reaped = 0.0
    for e in engines:
        reaped += (await e.scrape()).value("scheduler_runs_reaped_total", from_status="dispatched")
    stale = refused = 0.0
    for w in workers:
        scraped = await w.scrape()
        stale += scraped.value("scheduler_stale_results_total", stage="start")
        refused += scraped.value("scheduler_starts_refused_total")
    out: dict[str, Any] = dict(row) | {
        "stream_waiting": waiting,
        "stream_delivered": delivered,
        "reaped_dispatched": reaped,
        "stale_starts": stale,
        "refused_starts": refused,
        "signals": {},
    }
    if prom is not None:
        for q in queries:
            try:
                out["signals"][q.name] = await prom.value(q.expr)
            except ValueError as exc:
                out["signals"][q.name] = None
                out.setdefault("errors", []).append(str(exc))
    return out


def _figures(
    report: Report,
    n: int,
    samples: list[dict[str, Any]],
    wall: float,
    lags: Any,
    calls: int,
    queries: list[prometheus.Query],
) -> None:
    last = samples[-1]
    claims = float(last["claims"])
    report.table(
        "Drain to a slow target",
        [
            "runs",
            "seconds",
            "target calls",
            "claims per run",
            "dispatched runs reaped",
            "stale starts",
            "starts refused (paused)",
        ],
        [
            [
                n,
                wall,
                calls,
                claims / n,
                int(last["reaped_dispatched"]),
                int(last["stale_starts"]),
                int(last["refused_starts"]),
            ]
        ],
    )
    report.table(
        "Due lag (seconds after due_at), over every run",
        ["step", "p50", "p95", "p99"],
        [
            [step, *[float(x) for x in lags[col]]]
            for step, col in (("dispatched_at - due_at", "dispatched"), ("started_at - due_at", "started"))
        ],
    )
    peak_stream = max(s["stream_waiting"] for s in samples)
    peak_due = max(s["due_pending"] for s in samples)
    report.table(
        "Where the backlog waited (peak over the drain)",
        ["due pending in Postgres", "waiting in the stream", "delivered, not acked"],
        [[peak_due, peak_stream, max(s["stream_delivered"] for s in samples)]],
    )
    done_t = next(s["t"] for s in samples if s["succeeded"] >= n)
    rows = []
    for q in queries:
        values = [(s["t"], s["signals"].get(q.name)) for s in samples]
        during = [v for t, v in values if t < done_t and v is not None]
        fell = next((t - done_t for t, v in values if t >= done_t and not v), None)
        rows.append([q.name, max(during, default=None), q.threshold, fell])
    if rows:
        report.table(
            "Scaling signals and alerts, evaluated by Prometheus on the live scrapes",
            ["query", "peak during the drain", "threshold", "seconds to 0 or empty after the last run"],
            rows,
        )
    errors = sorted({e for s in samples for e in s.get("errors", [])})
    if errors:
        report.notes.append(f"queries Prometheus refused: {errors}")
    report.target("claims per run", claims / n, "<=", 1.02)
    report.target("dispatched runs reaped", float(last["reaped_dispatched"]), "<=", 0)
    report.data |= {"samples": samples, "wall_seconds": wall, "lags": dict(lags)}
    report.draw = lambda fig: _chart(fig, samples, queries)
    report.not_mean = (
        "Few engines and workers against a loopback target that only sleeps: the figures show how "
        "the scheduler behaves when workers bind (claims, reaps, where the backlog waits, which signal "
        "rises), not how many runs per second a deployment can drive. The lease is shortened to make a "
        "minute-long effect show in seconds; the scrape interval is 1 s, not a production 15-30 s. "
        + shared_host(report, "Postgres, NATS, Prometheus and the scheduler's processes")
    )


def _chart(fig: Any, samples: list[dict[str, Any]], queries: list[prometheus.Query]) -> None:
    t = [s["t"] for s in samples]
    ax = fig.add_subplot(1, 2, 1)
    for key, label in (
        ("due_pending", "due pending (Postgres)"),
        ("stream_waiting", "waiting in the stream"),
        ("running", "running"),
        ("reaped_dispatched", "dispatched runs reaped (cumulative)"),
    ):
        ax.plot(t, [s[key] for s in samples], label=label)
    ax.set_xlabel("seconds since due")
    ax.set_ylabel("runs")
    ax.set_title("Where the backlog waits")
    ax.legend(fontsize=7)
    ax = fig.add_subplot(1, 2, 2)
    for q in queries:
        if q.threshold:
            ax.plot(t, [(s["signals"].get(q.name) or 0) / q.threshold for s in samples], label=q.name)
    ax.axhline(1.0, color="grey", linewidth=0.5)
    ax.set_xlabel("seconds since due")
    ax.set_ylabel("query value / threshold")
    ax.set_title("Scaling signals (Prometheus)")
    if queries:
        ax.legend(fontsize=7)
