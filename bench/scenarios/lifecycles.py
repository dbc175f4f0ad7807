"""lifecycles: Postgres's own CPU a job for bare job lifecycles, each on one table in a database of its
own — the floor under a queue's drain, with no queue's code around it (issue 35, verdict 45).

- `queue`: graphile-worker's lifecycle — a job inserted, locked (an UPDATE of the column its claim
  index's predicate reads), deleted when done: two row versions and a delete.
- `contract`: the least this scheduler's contract writes — the run's record inserted and kept after
  it ends (GET /runs), claimed with a new epoch before it is published (the fence), its start and
  outcome recorded by one fenced write (a noop run, decision 17): three row versions. With the
  indexes its reads need: the key, the tenant's listing newest first, the claim's (priority, due_at)
  and the fair claim's per-tenant one over pending runs; ids in time order, as scheduler_run_id's.
- `contract, no listing` and `contract, no fair index`: the same without that index, to price it.

Each: N jobs inserted in one statement and analyzed, then claimed 500 at a time (FOR UPDATE SKIP
LOCKED) and finished 250 at a time on one connection, each statement its own transaction. The
figures are CPU a job, insert included: the connection's backend, and every `postgres` process
(the WAL writer, autovacuum, …) from /proc, so Postgres must share this host. Rounds alternate the
order of the lifecycles."""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from pathlib import Path
from typing import Any

import asyncpg

from app.db.queries import parse
from bench.measure import cpu_seconds
from bench.report import Report
from bench.scenarios._common import begin, shared_host, sized
from bench.stack import Bench
from stack.databases import create_database, drop_database, with_database

NAME = "lifecycles"
HELP = "Postgres's CPU a job: graphile-worker's lifecycle (insert, lock, delete) vs the least ours writes"
CLAIM_BATCH = 500
FINISH_BATCH = 250

_QUEUE = """
CREATE TABLE job (id bigserial PRIMARY KEY, task text NOT NULL, payload json NOT NULL DEFAULT '{}',
                  priority smallint NOT NULL DEFAULT 0, run_at timestamptz NOT NULL DEFAULT now(),
                  attempts smallint NOT NULL DEFAULT 0, locked_at timestamptz, locked_by text,
                  created_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX job_main ON job (priority, run_at) INCLUDE (id, task) WHERE locked_at IS NULL;
"""
_RUN = """
CREATE TABLE run (id uuid PRIMARY KEY, tenant_id text NOT NULL, job text NOT NULL,
                  status text NOT NULL DEFAULT 'pending', payload jsonb NOT NULL DEFAULT '{}',
                  priority smallint NOT NULL DEFAULT 5, scheduled_at timestamptz NOT NULL,
                  due_at timestamptz NOT NULL, epoch bigint NOT NULL DEFAULT 0,
                  lease_expires_at timestamptz, started_at timestamptz, finished_at timestamptz,
                  created_at timestamptz NOT NULL DEFAULT now())
WITH (fillfactor = 50);
CREATE INDEX run_due ON run (priority, due_at) WHERE status = 'pending';
"""
_LISTING = "CREATE INDEX run_listing ON run (tenant_id, scheduled_at DESC, id DESC);"
_FAIR = "CREATE INDEX run_tenant_due ON run (tenant_id, priority, due_at) WHERE status = 'pending';"
LIFECYCLES = {
    "queue": _QUEUE,
    "contract": _RUN + _LISTING + _FAIR,
    "contract, no listing": _RUN + _FAIR,
    "contract, no fair index": _RUN + _LISTING,
}

SQL = parse(r"""
-- name: queue_insert
INSERT INTO job (task) SELECT 'noop' FROM generate_series(1, :n);

-- name: queue_claim
WITH j AS (
    SELECT id FROM job WHERE locked_at IS NULL AND run_at <= now()
    ORDER BY priority, run_at, id LIMIT :batch FOR UPDATE SKIP LOCKED
)
UPDATE job SET locked_at = now(), locked_by = 'bench', attempts = job.attempts + 1 FROM j WHERE job.id = j.id
RETURNING job.id, job.task, job.payload;

-- name: queue_done
DELETE FROM job WHERE id = ANY(CAST(:ids AS bigint[])) AND locked_by = 'bench';

-- name: run_insert
-- Ids in time order (a sequence in the uuid's leading bits), as scheduler_run_id makes them.
INSERT INTO run (id, tenant_id, job, scheduled_at, due_at)
SELECT CAST(lpad(to_hex(i), 32, '0') AS uuid), 't' || (i % 50), 'noop', now(), now()
FROM generate_series(1, :n) AS i;

-- name: run_claim
WITH r AS (
    SELECT id FROM run WHERE status = 'pending' AND due_at <= now()
    ORDER BY priority, due_at LIMIT :batch FOR UPDATE SKIP LOCKED
)
UPDATE run SET status = 'dispatched', epoch = run.epoch + 1, lease_expires_at = now() + interval '30 s'
FROM r WHERE run.id = r.id
RETURNING run.id, run.epoch, run.job, run.payload;

-- name: run_done
UPDATE run SET status = 'succeeded', started_at = now(), finished_at = now(), lease_expires_at = NULL
FROM unnest(CAST(:ids AS uuid[]), CAST(:epochs AS bigint[])) AS f(id, epoch)
WHERE run.id = f.id AND run.epoch = f.epoch AND run.status = 'dispatched';
""")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs", type=int, help="jobs per lifecycle (default 20000; smoke 2000)")
    p.add_argument("--rounds", type=int, help="rounds of every lifecycle (default 4; smoke 1)")


async def _q(conn: asyncpg.Connection, name: str, **values: Any) -> list[asyncpg.Record]:
    q = SQL[name]
    return list(await conn.fetch(q.sql, *q.args(values)))


async def _drain(conn: asyncpg.Connection, lifecycle: str, n: int) -> None:
    queue = lifecycle == "queue"
    await _q(conn, "queue_insert" if queue else "run_insert", n=n)
    await conn.execute("ANALYZE job" if queue else "ANALYZE run")  # its table only: not the catalogs
    done = 0
    while done < n:
        claimed = await _q(conn, "queue_claim" if queue else "run_claim", batch=CLAIM_BATCH)
        if not claimed:
            raise RuntimeError(f"lifecycles: {lifecycle} claimed nothing with {n - done} jobs left")
        for i in range(0, len(claimed), FINISH_BATCH):
            part = claimed[i : i + FINISH_BATCH]
            if queue:
                await _q(conn, "queue_done", ids=[r["id"] for r in part])
            else:
                await _q(conn, "run_done", ids=[r["id"] for r in part], epochs=[r["epoch"] for r in part])
        done += len(claimed)


async def _one(bench: Bench, lifecycle: str, n: int) -> dict[str, float]:
    admin = bench.services.postgres_url
    db = await create_database(admin, f"bench_{os.getpid()}_lifecycle")  # one at a time, dropped after
    try:
        conn = await asyncpg.connect(with_database(admin, db))
        try:
            await conn.execute(LIFECYCLES[lifecycle])
            pid = await conn.fetchval("SELECT pg_backend_pid()")
            before, t0 = cpu_seconds({"backend": pid}, ("postgres",)), time.perf_counter()
            await _drain(conn, lifecycle, n)
            after, wall = cpu_seconds({"backend": pid}, ("postgres",)), time.perf_counter() - t0
        finally:
            await conn.close()
    finally:
        await drop_database(admin, db)
    backend = after["backend"] - before["backend"]
    return {
        "backend_us": backend / n * 1e6,
        # cpu_seconds counts the backend under its label only, not again under its command's name.
        "postgres_us": (backend + after["postgres"] - before["postgres"]) / n * 1e6,
        "seconds": wall,
    }


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    n = sized(args.jobs, full=20_000, smoke=2_000, is_smoke=bench.smoke)
    rounds = sized(args.rounds, full=4, smoke=1, is_smoke=bench.smoke)
    report = await begin(bench, NAME)
    if not report.env["db_shares_host"] or not Path("/proc").is_dir():
        raise SystemExit("lifecycles: needs Postgres on this host and /proc (Linux), where its CPU is read")
    report.workload = {
        "jobs per lifecycle": n,
        "rounds": rounds,
        "batches": f"claim {CLAIM_BATCH} (FOR UPDATE SKIP LOCKED), finish {FINISH_BATCH}, one connection",
    }
    names = list(LIFECYCLES)
    results: dict[str, list[dict[str, float]]] = {k: [] for k in names}
    for r in range(rounds):
        for lifecycle in names if r % 2 == 0 else names[::-1]:
            m = await _one(bench, lifecycle, n)
            results[lifecycle].append(m)
            print(
                f"  round {r + 1}: {lifecycle}: backend {m['backend_us']:.1f} µs a job, "
                f"every postgres process {m['postgres_us']:.1f}",
                flush=True,
            )

    def median(lifecycle: str, key: str) -> float:
        return statistics.median(m[key] for m in results[lifecycle])

    def x(us: float, queue_us: float) -> float:  # a smoke's few jobs can take less than a clock tick
        return us / queue_us if queue_us else math.nan

    def worst(lifecycle: str) -> float:
        pairs = zip(results[lifecycle], results["queue"], strict=True)
        return max(x(m["backend_us"], q["backend_us"]) for m, q in pairs)

    base = median("queue", "backend_us")
    report.table(
        "Postgres's CPU a job, insert included (µs, median of rounds; x = the backend's against `queue`)",
        ["lifecycle", "backend", "x queue", "worst x", "every postgres process", "jobs/s"],
        [
            [
                k,
                median(k, "backend_us"),
                x(median(k, "backend_us"), base),
                worst(k),
                median(k, "postgres_us"),
                n / median(k, "seconds"),
            ]
            for k in names
        ],
    )
    report.data["results"] = results
    report.not_mean = (
        "Bare tables and statements on one connection, nothing else running: the least each "
        "lifecycle asks of Postgres, not a queue's drain (no locking between workers, no "
        "notifications, no retries, no payloads of any size). `queue` is shaped like "
        "graphile-worker's jobs table and statements, not graphile-worker itself (`peers` drains "
        "that). " + shared_host(report, "Postgres")
    )
    return report
