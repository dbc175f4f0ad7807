"""held: does held-back work cost the claim anything? (issue 17)

5,000 unlimited runs of 49 tenants are claimed to the end beside a standing backlog of 100,000 held
runs of one tenant — a concurrency key limited to 1 with its slot taken, a paused job, or a key
rate-limited to 1 an hour whose window is full — and beside no held runs at all. The cases
alternate round by round (rotating order) in one process, so drift on a shared machine hits each of
them. The engine's flow keeper runs beside the claims, every keeper_interval_seconds, as it does in
an engine. Figures: the unlimited runs' claim-drain rate and
the claim statement's p50, each as a ratio to the no-held case of the same rounds.

It measures the claim side (claim_due_runs to dispatched, nothing published): the statement a held
backlog could slow down. End to end, the held backlog adds nothing beyond it: publish, start and
finish never see a held run."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from datetime import timedelta

import asyncpg

from app.config import Settings
from app.db.connection import create_pool
from app.engine.claims import claim_scan
from app.engine.floor import ClaimBounds
from app.engine.keeper import FlowKeeper
from bench import workload
from bench.measure import latency_ms, rate
from bench.report import Report
from bench.scenarios._common import begin, shared_host, sized
from bench.stack import Bench

NAME = "held"
HELP = "claim cost beside 100k held runs (concurrency-limited key, paused job, rate-limited key) vs none"
CASES = ("none", "concurrency", "paused", "rate_limit")
JOBS = {"concurrency": "limited", "paused": "paused", "rate_limit": "rated"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--held", type=int, help="held runs of one tenant (default 100000; smoke 2000)")
    p.add_argument("--runs", type=int, help="unlimited runs to claim (default 5000; smoke 500)")
    p.add_argument("--tenants", type=int, default=50, help="tenants (t000 holds the held runs)")
    p.add_argument("--rounds", type=int, help="rounds of the four cases (default 3; smoke 1)")


async def _prepare(conn: asyncpg.Connection, case: str, held: int, runs: int, tenants: int) -> int:
    """A fresh backlog for `case`; returns how many unlimited runs it holds."""
    await workload.reset_runs(conn)
    await conn.execute("TRUNCATE concurrency_holders, rate_limit_starts")
    await conn.execute("UPDATE concurrency_slots SET next_at = NULL")
    now = await workload.fetchval(conn, "clock")
    if case != "none":
        await workload.execute(
            conn,
            "insert_held_backlog",
            n=held,
            job=JOBS[case],
            held=case,
            target=workload.NOOP,
            first_at=now - timedelta(seconds=600),
            step=300.0 / held,
        )
        if case == "concurrency":  # its one slot is taken: the keeper can grant nothing
            await conn.execute(
                "INSERT INTO concurrency_holders (run_id, tenant_id, job, key) "
                "VALUES (gen_random_uuid(), 't000', 'limited', '')"
            )
        if case == "rate_limit":  # a start a moment ago fills its window for an hour
            await conn.execute(
                "INSERT INTO rate_limit_starts (run_id, tenant_id, job, key, granted_at, started_at) "
                "VALUES (gen_random_uuid(), 't000', 'rated', '', now(), now())"
            )
    # The unlimited runs: round-robin over the tenants, all due (the held ones are older); t000's
    # share goes, so every unlimited run belongs to another tenant.
    await workload.insert_backlog(conn, runs, tenants, first_at=now - timedelta(seconds=60), step=30.0 / runs)
    await conn.execute("DELETE FROM job_runs WHERE tenant_id = 't000' AND held IS NULL")
    await conn.execute("ANALYZE job_runs, run_queue")
    return int(await conn.fetchval("SELECT count(*) FROM job_runs WHERE held IS NULL"))


async def _drain(
    pool: asyncpg.Pool, settings: Settings, keeper: FlowKeeper, runs: int
) -> tuple[float, list[float]]:
    """Claims until every unlimited run is dispatched; (seconds, claim statement seconds)."""
    stop = asyncio.Event()

    async def keep() -> None:
        while not stop.is_set():
            await keeper.step()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), keeper.settings.keeper_interval_seconds)

    keeping = asyncio.create_task(keep())
    samples: list[float] = []
    claimed = 0
    bounds = ClaimBounds()
    start = time.perf_counter()
    try:
        async with pool.acquire() as conn:
            while claimed < runs:
                t0 = time.perf_counter()
                rows = await claim_scan(conn, settings, bounds)
                samples.append(time.perf_counter() - t0)
                if not rows:
                    raise RuntimeError(f"the claim found nothing after {claimed} of {runs} runs")
                claimed += len(rows)
        return time.perf_counter() - start, samples
    finally:
        stop.set()
        await keeping


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    report = await begin(bench, NAME)
    held = sized(args.held, full=100_000, smoke=2_000, is_smoke=bench.smoke)
    runs = sized(args.runs, full=5_000, smoke=500, is_smoke=bench.smoke)
    rounds = sized(args.rounds, full=3, smoke=1, is_smoke=bench.smoke)
    # Per case and round: (unlimited runs claimed, seconds, claim statement seconds).
    results: dict[str, list[tuple[int, float, list[float]]]] = {c: [] for c in CASES}
    async with bench.database() as url:
        settings = bench.settings(url)
        report.workload = {
            "held runs (tenant t000)": held,
            "unlimited runs claimed": runs,
            "tenants": args.tenants,
            "rounds (cases alternate, rotating order)": rounds,
            "batch_size": settings.batch_size,
            "per_tenant_cap": settings.per_tenant_cap,
            "keeper_interval_seconds": settings.keeper_interval_seconds,
        }
        pool = await create_pool(url, min_size=2, max_size=3, name="bench-held")
        try:
            async with pool.acquire() as conn:
                await workload.seed_tenants(conn, args.tenants)
                await conn.execute(
                    "INSERT INTO jobs (tenant_id, name, target, concurrency) VALUES "
                    "('t000', 'limited', '{\"type\": \"noop\"}', '{\"limit\": 1, \"key\": null}')"
                )
                await conn.execute(
                    "INSERT INTO jobs (tenant_id, name, target, paused) "
                    "VALUES ('t000', 'paused', '{\"type\": \"noop\"}', true)"
                )
                await conn.execute(
                    "INSERT INTO jobs (tenant_id, name, target, rate_limit) VALUES ('t000', 'rated', "
                    '\'{"type": "noop"}\', \'{"limit": 1, "period_seconds": 3600, "key": null}\')'
                )
            keeper = FlowKeeper(settings, pool)
            for r in range(rounds):
                for case in CASES[r % len(CASES) :] + CASES[: r % len(CASES)]:
                    async with pool.acquire() as conn:
                        unlimited = await _prepare(conn, case, held, runs, args.tenants)
                    print(f"  round {r + 1}/{rounds}: {case}", flush=True)
                    results[case].append((unlimited, *await _drain(pool, settings, keeper, unlimited)))
        finally:
            await pool.close()
    _figures(report, results)
    return report


def _figures(report: Report, results: dict[str, list[tuple[int, float, list[float]]]]) -> None:
    rows = []
    base_rate = statistics.median(rate(n, wall) for n, wall, _ in results["none"])
    base_p50 = statistics.median(latency_ms(s)["p50_ms"] for _, _, s in results["none"])
    for case, measured in results.items():
        runs_s = statistics.median(rate(n, wall) for n, wall, _ in measured)
        p50 = statistics.median(latency_ms(s)["p50_ms"] for _, _, s in measured)
        rows.append([case, runs_s, runs_s / base_rate, p50, p50 / base_p50, len(measured)])
        if case != "none":
            report.target(
                f"{case}: unlimited claim-drain rate vs no held runs", runs_s / base_rate, ">=", 0.8, "x"
            )
            report.target(f"{case}: claim p50 vs no held runs", p50 / base_p50, "<=", 1.5, "x")
    report.table(
        "Unlimited runs claimed beside held runs (medians over rounds)",
        ["held backlog", "runs/s", "x none", "claim p50 ms", "x none", "rounds"],
        rows,
    )
    report.data["results"] = {
        c: [{"runs": n, "seconds": w, "claim": latency_ms(s)} for n, w, s in m] for c, m in results.items()
    }
    report.not_mean = (
        "Claims only: nothing is published or executed, so the rate is the claim statement's, not an "
        "end-to-end drain (`drain` measures that; the held runs never reach publish, start or "
        "finish). The held runs are inserted straight into Postgres in the held state the API gives "
        "them, and the keeper runs in the bench's process. The rate-limited key's window is full for "
        "the whole drain: it measures a key waiting for room (the keeper skips it until then), not "
        "the pacing of its starts (the integration tests check that at a receiver). "
        + shared_host(report, "Postgres")
    )
