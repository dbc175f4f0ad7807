"""dependents: do runs held on their parents cost the claim anything, and how soon are a parent's
dependents released? (issue 33)

Claim cost, as `held` measures it: 5,000 free runs of 49 tenants are claimed to the end beside
100,000 runs of tenant t000 held 'dependencies' on 100 running parents (1,000 each, one edge each,
as the API writes them), and beside none; the cases alternate round by round in one process. Figures:
the free runs' claim-drain rate and the claim statement's p50, each as a ratio to the no-held case.

Release: one running parent with 10,000 held dependents succeeds through finish_runs, the worker's
statement; the release happens in that statement (the trigger of migration 0023), so its duration,
commit included, is the time from the parent's success to its dependents being claimable. The
dependents are then claimed to be sure they are. For reference, on the same host at the same moment,
a resume (release_paused_runs) releases as many paused runs."""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from datetime import timedelta

import asyncpg

from app.config import Settings
from app.db import flow as flow_repo
from app.db import transitions
from app.db.connection import create_pool
from app.db.transitions import Fence
from app.domain import NO_RESULT, StoredResult
from app.engine.claims import claim_scan
from app.engine.floor import ClaimBounds
from app.engine.keeper import FlowKeeper
from bench import workload
from bench.measure import latency_ms, rate
from bench.report import Report
from bench.scenarios._common import begin, shared_host, sized
from bench.scenarios.held import _drain
from bench.stack import Bench

NAME = "dependents"
HELP = "claim cost beside 100k runs held on parents vs none; release of 10k dependents of one parent"
CASES = ("none", "dependencies")
Release = tuple[float, int, int, float]

# Running parents of t000 (their lease an hour ahead: nothing rescues them during the bench).
INSERT_PARENTS = """
INSERT INTO job_runs (id, scheduled_at, tenant_id, job, status, payload, target, max_attempts,
                      backoff_seconds, timeout_seconds, attempt, epoch, due_at, dispatched_at, started_at,
                      lease_owner, lease_expires_at, dependents)
SELECT scheduler_run_id(s.at), s.at, 't000', 'noop', 'running', '{}', '{"type": "noop"}', 1, 1, 30, 1, 1,
       s.at, s.at, s.at, 'bench', now() + interval '1 hour', $2
FROM generate_series(0, $1 - 1) AS g
CROSS JOIN LATERAL (SELECT $3::timestamptz + make_interval(secs => g)) AS s(at)
"""
# Their dependents, held as insert_runs and hold_dependents leave them, and the edges.
INSERT_DEPENDENTS = """
WITH p AS (
    SELECT id, scheduled_at, row_number() OVER (ORDER BY id) - 1 AS k FROM job_runs
    WHERE tenant_id = 't000' AND status = 'running'
),
c AS (
    INSERT INTO job_runs (id, scheduled_at, tenant_id, job, payload, target, max_attempts, backoff_seconds,
                          timeout_seconds, due_at, held, held_due_at, depends_on, parents_waiting)
    SELECT scheduler_run_id(s.at), s.at, 't000', 'noop', '{}', '{"type": "noop"}', 1, 1, 30, 'infinity',
           'dependencies', s.at, ARRAY[p.id], 1
    FROM generate_series(0, $1 - 1) AS g
    CROSS JOIN LATERAL (SELECT $2::timestamptz + make_interval(secs => g * $3::float8)) AS s(at)
    JOIN p ON p.k = g % (SELECT count(*) FROM p)
    RETURNING id, scheduled_at, depends_on[1] AS parent
)
INSERT INTO run_dependencies (child_id, child_scheduled_at, parent_id, parent_scheduled_at, tenant_id, name,
                              on_parent_failure, settled)
SELECT c.id, c.scheduled_at, p.id, p.scheduled_at, 't000', CAST(p.id AS text), 'cancel', false
FROM c JOIN p ON p.id = c.parent
"""


@dataclass
class _Success:
    """The worker's outcome of a success (app.domain.AttemptOutcome)."""

    ok: bool = True
    error: str | None = None
    outcome: str = "succeeded"
    http_status: int | None = None
    retry_after: float | None = None
    result: StoredResult = NO_RESULT


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--held", type=int, help="runs held on parents (default 100000; smoke 2000)")
    p.add_argument("--parents", type=int, default=100, help="running parents they wait for")
    p.add_argument("--runs", type=int, help="free runs to claim (default 5000; smoke 500)")
    p.add_argument("--tenants", type=int, default=50, help="tenants (t000 holds the held runs)")
    p.add_argument(
        "--rounds",
        type=int,
        help="rounds of both cases (default 9: a round is 10 claims, and their p50 moves 12-21 ms "
        "between rounds of the same case on a 2-core host; smoke 1)",
    )
    p.add_argument("--dependents", type=int, help="dependents of the one parent released (default 10000)")


async def _prepare(
    conn: asyncpg.Connection, case: str, held: int, parents: int, runs: int, tenants: int
) -> int:
    """A fresh backlog for `case`; returns how many free runs it holds."""
    await workload.reset_runs(conn)
    await conn.execute("TRUNCATE run_dependencies")
    now = await workload.fetchval(conn, "clock")
    await workload.insert_backlog(conn, runs, tenants, first_at=now - timedelta(seconds=60), step=30.0 / runs)
    await conn.execute("DELETE FROM job_runs WHERE tenant_id = 't000'")
    if case == "dependencies":
        await _held_family(conn, parents, held, now - timedelta(seconds=600))
    await conn.execute("ANALYZE job_runs, run_queue, run_dependencies")
    return int(await conn.fetchval("SELECT count(*) FROM job_runs WHERE held IS NULL AND status = 'pending'"))


async def _held_family(conn: asyncpg.Connection, parents: int, held: int, first_at: object) -> None:
    await conn.execute(INSERT_PARENTS, parents, held // parents, first_at)
    await conn.execute(INSERT_DEPENDENTS, held, first_at, 300.0 / held)


async def _release(pool: asyncpg.Pool, settings: Settings, dependents: int) -> Release:
    """(seconds finish_runs took, dependents released by it, dependents then claimed, seconds a
    resume of as many paused runs took)."""
    async with pool.acquire() as conn:
        await workload.reset_runs(conn)
        await conn.execute("TRUNCATE run_dependencies")
        now = await workload.fetchval(conn, "clock")
        await _held_family(conn, 1, dependents, now - timedelta(seconds=600))
        await conn.execute("ANALYZE job_runs, run_queue, run_dependencies")
        parent = await conn.fetchrow("SELECT id, scheduled_at, epoch FROM job_runs WHERE status = 'running'")
        fence = Fence([(parent["id"], parent["scheduled_at"], parent["epoch"])])
        t0 = time.perf_counter()
        await transitions.finish_runs(conn, fence, [_Success()])
        seconds = time.perf_counter() - t0
        released = int(
            await conn.fetchval("SELECT count(*) FROM job_runs WHERE status = 'pending' AND held IS NULL")
        )
        claimed = 0
        while rows := await claim_scan(conn, settings, ClaimBounds()):
            claimed += len(rows)
        # The reference on the same host at the same moment: a resume releasing as many paused runs
        # (release_paused_runs, the statement the API's resume runs).
        await workload.reset_runs(conn)
        await workload.execute(
            conn,
            "insert_held_backlog",
            n=dependents,
            job="noop",
            held="paused",
            target=workload.NOOP,
            first_at=now - timedelta(seconds=600),
            step=300.0 / dependents,
        )
        await conn.execute("ANALYZE job_runs, run_queue")
        t0 = time.perf_counter()
        resumed = len(await flow_repo.release_paused_runs(conn, "t000", None))
        resume_seconds = time.perf_counter() - t0
        assert resumed == dependents, resumed
    return seconds, released, claimed, resume_seconds


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    report = await begin(bench, NAME)
    held = sized(args.held, full=100_000, smoke=2_000, is_smoke=bench.smoke)
    runs = sized(args.runs, full=5_000, smoke=500, is_smoke=bench.smoke)
    rounds = sized(args.rounds, full=9, smoke=1, is_smoke=bench.smoke)
    dependents = sized(args.dependents, full=10_000, smoke=1_000, is_smoke=bench.smoke)
    results: dict[str, list[tuple[int, float, list[float]]]] = {c: [] for c in CASES}
    releases: list[Release] = []
    async with bench.database() as url:
        settings = bench.settings(url)
        report.workload = {
            "runs held on parents (tenant t000)": held,
            "their running parents": args.parents,
            "free runs claimed": runs,
            "tenants": args.tenants,
            "rounds (cases alternate, rotating order)": rounds,
            "dependents of the one parent released": dependents,
            "batch_size": settings.batch_size,
            "per_tenant_cap": settings.per_tenant_cap,
        }
        pool = await create_pool(url, min_size=2, max_size=3, name="bench-dependents")
        try:
            async with pool.acquire() as conn:
                await workload.seed_tenants(conn, args.tenants)
            keeper = FlowKeeper(settings, pool)
            for r in range(rounds):
                for case in CASES[r % len(CASES) :] + CASES[: r % len(CASES)]:
                    async with pool.acquire() as conn:
                        free = await _prepare(conn, case, held, args.parents, runs, args.tenants)
                    print(f"  round {r + 1}/{rounds}: {case}", flush=True)
                    results[case].append((free, *await _drain(pool, settings, keeper, free)))
                releases.append(await _release(pool, settings, dependents))
                print(f"  round {r + 1}/{rounds}: release {releases[-1]}", flush=True)
        finally:
            await pool.close()
    _figures(report, results, releases, dependents)
    return report


def _figures(
    report: Report,
    results: dict[str, list[tuple[int, float, list[float]]]],
    releases: list[Release],
    dependents: int,
) -> None:
    base_rate = statistics.median(rate(n, wall) for n, wall, _ in results["none"])
    base_p50 = statistics.median(latency_ms(s)["p50_ms"] for _, _, s in results["none"])
    rows: list[list[object]] = []
    for case, measured in results.items():
        runs_s = statistics.median(rate(n, wall) for n, wall, _ in measured)
        p50 = statistics.median(latency_ms(s)["p50_ms"] for _, _, s in measured)
        rows.append([case, runs_s, runs_s / base_rate, p50, p50 / base_p50, len(measured)])
        if case != "none":
            report.target("others' claim-drain rate vs none held", runs_s / base_rate, ">=", 0.9, "x")
            report.target("claim p50 vs none held", p50 / base_p50, "<=", 1.1, "x")
    release_s = statistics.median(r[0] for r in releases)
    resume_s = statistics.median(r[3] for r in releases)
    report.target(f"release of {dependents} dependents: the parent's finish_runs", release_s, "<=", 1.0, "s")
    report.target("the same, its worst round", max(r[0] for r in releases), "<=", 1.0, "s")
    report.target("release vs a resume of as many paused runs", release_s / resume_s, "<=", 1.5, "x")
    report.target("dependents released by it", min(r[1] for r in releases), ">=", dependents, "runs")
    report.target("dependents then claimed", min(r[2] for r in releases), ">=", dependents, "runs")
    report.table(
        "Free runs claimed beside runs held on parents (medians over rounds)",
        ["held backlog", "runs/s", "x none", "claim p50 ms", "x none", "rounds"],
        rows,
    )
    report.table(
        "A parent's success releasing its dependents (per round)",
        ["finish_runs s", "released", "claimed", "resume of as many paused s"],
        [list(r) for r in releases],
    )
    report.data["results"] = {
        c: [{"runs": n, "seconds": w, "claim": latency_ms(s)} for n, w, s in m] for c, m in results.items()
    }
    report.data["releases"] = [
        {"seconds": s, "released": n, "claimed": c, "resume_seconds": r} for s, n, c, r in releases
    ]
    report.not_mean = (
        "Claims only, as `held`: nothing is published or executed. The held runs, their parents and "
        "edges are inserted straight into Postgres in the state the API leaves them; the release is "
        "the worker's finish statement on one parent, timed from the bench's process (commit included). "
        + shared_host(report, "Postgres")
    )
