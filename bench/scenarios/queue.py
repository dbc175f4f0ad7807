"""queue: the option of a narrow queue table beside the runs, priced at the SQL level before anyone
builds it (issue 19; docs/bench.md verdict 30).

Today every transition of a run writes a new version of its job_runs row, none of them HOT: `status`
is in the predicate of five partial indexes (pending, leased, live, pulled forward), so each version
also gets an entry in every full index. The option moves what the queue needs (a pending run's
priority and due time, a dispatched or running run's lease) into a narrow table of live runs, so the
job_runs indexes name nothing a transition changes and its updates can be HOT, given free room on
the page (fillfactor below 100, which costs the history its density).

Each variant runs the same lifecycle on a fresh database, one connection, one statement at a time:
the backlog inserted in one statement, claimed in batches by the app's claim, started in batches of
100 in claim order by the app's start, and (`python`) finished in batches of 100 by the app's
finish. `as is` runs the app's statements on the app's schema. The `narrow` variants run the same
statements, rewritten to read candidates from the queue table and to keep it in step (a run's queue
row is inserted with it, leased by the claim, re-leased by a non-inline start and deleted when it
ends), on job_runs without the five status indexes, with fillfactor 100 or 50; the last variant
leaves the app's statements as they are (but for the claim's source) and keeps the queue in step by
statement triggers on job_runs, as every writer would then do without knowing it. Measured per run:
the Postgres backend's CPU (from /proc, so Postgres must share this host), its WAL, and what the
runs' rows and indexes hold at the end. Variants rotate within each round."""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg

from app.db import transitions
from app.db.connection import connect
from app.db.queries import QUERIES
from app.db.transitions import Fence
from app.domain import StoredResult
from bench import workload
from bench.progress import tqdm
from bench.report import Report
from bench.scenarios._common import begin, shared_host, sized
from bench.stack import Bench

NAME = "queue"
HELP = "a narrow HOT-updated queue table (prototype; by statements or triggers) vs the schema as is: CPU, WAL"
AS_IS = "as is"
START_BATCH = 100  # runs per start / finish statement: about what a worker's fetch brings
STATUS_INDEXES = (
    "job_runs_pending_due",
    "job_runs_pending_tenant_due",
    "job_runs_leased",
    "job_runs_live",
    "job_runs_pulled_forward",
)
QUEUE_DDL = """
CREATE TABLE run_queue (
    id uuid NOT NULL, scheduled_at timestamptz NOT NULL, tenant_id text NOT NULL,
    priority smallint NOT NULL, due_at timestamptz NOT NULL,
    state smallint NOT NULL DEFAULT 0,  -- 0 pending, 1 dispatched, 2 running
    lease_expires_at timestamptz,
    PRIMARY KEY (id, scheduled_at));
CREATE INDEX run_queue_due ON run_queue (priority, due_at) WHERE state = 0;
CREATE INDEX run_queue_tenant_due ON run_queue (tenant_id, priority, due_at) WHERE state = 0;
CREATE INDEX run_queue_leased ON run_queue (lease_expires_at) WHERE state > 0;
CREATE INDEX run_queue_floor ON run_queue (scheduled_at);"""
# The other way to keep the queue in step: statement triggers on job_runs, which every writer fires
# (inserts, transitions, cancels, holds, cron, deletions), so no statement has to remember it.
QUEUE_TRIGGERS = """
CREATE FUNCTION run_queue_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_queue (id, scheduled_at, tenant_id, priority, due_at)
    SELECT id, scheduled_at, tenant_id, priority, due_at FROM new_runs
    WHERE status = 'pending' AND held IS NULL;
    RETURN NULL;
END $$;
CREATE FUNCTION run_queue_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM run_queue q USING new_runs n
    WHERE q.id = n.id AND q.scheduled_at = n.scheduled_at
      AND NOT (n.status IN ('pending', 'dispatched', 'running') AND n.held IS NULL);
    INSERT INTO run_queue AS q (id, scheduled_at, tenant_id, priority, due_at, state, lease_expires_at)
    SELECT id, scheduled_at, tenant_id, priority, due_at,
           CASE status WHEN 'pending' THEN 0 WHEN 'dispatched' THEN 1 ELSE 2 END, lease_expires_at
    FROM new_runs WHERE status IN ('pending', 'dispatched', 'running') AND held IS NULL
    ON CONFLICT (id, scheduled_at) DO UPDATE
    SET state = excluded.state, lease_expires_at = excluded.lease_expires_at,
        priority = excluded.priority, due_at = excluded.due_at
    WHERE (q.state, q.lease_expires_at, q.priority, q.due_at)
          IS DISTINCT FROM (excluded.state, excluded.lease_expires_at, excluded.priority, excluded.due_at);
    RETURN NULL;
END $$;
CREATE FUNCTION run_queue_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM run_queue q USING old_runs o WHERE q.id = o.id AND q.scheduled_at = o.scheduled_at;
    RETURN NULL;
END $$;
CREATE TRIGGER run_queue_insert AFTER INSERT ON job_runs REFERENCING NEW TABLE AS new_runs
    FOR EACH STATEMENT EXECUTE FUNCTION run_queue_inserted();
CREATE TRIGGER run_queue_update AFTER UPDATE ON job_runs REFERENCING NEW TABLE AS new_runs
    FOR EACH STATEMENT EXECUTE FUNCTION run_queue_updated();
CREATE TRIGGER run_queue_delete AFTER DELETE ON job_runs REFERENCING OLD TABLE AS old_runs
    FOR EACH STATEMENT EXECUTE FUNCTION run_queue_deleted();"""


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    narrow: bool
    fillfactor: int = 100
    triggers: bool = False  # the queue kept in step by triggers, not by the statements

    @property
    def explicit(self) -> bool:
        return self.narrow and not self.triggers


VARIANTS = (
    Variant(AS_IS, False),
    Variant("narrow, fillfactor 100", True),
    Variant("narrow, fillfactor 50", True, 50),
    Variant("narrow by triggers, fillfactor 50", True, 50, triggers=True),
)
PARTITIONS = (
    "SELECT c.oid, c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
    "WHERE i.inhparent = 'job_runs'::regclass"
)


def _replaced(sql: str, old: str, new: str) -> str:
    """The prototype's statements are the app's, rewritten: a rewrite that no longer matches the
    app's text must fail loudly, not price something else."""
    if old not in sql:
        raise RuntimeError(f"the app's statement changed: {old!r} not found; update bench/scenarios/queue.py")
    return sql.replace(old, new)


def _narrow_insert() -> str:
    """The backlog's insert, each run's queue row written by the same statement."""
    sql = workload.SQL["insert_backlog"].sql
    return (
        f"WITH r AS ({sql} RETURNING id, scheduled_at, tenant_id, priority, due_at)\n"
        "INSERT INTO run_queue (id, scheduled_at, tenant_id, priority, due_at) SELECT * FROM r"
    )


def _narrow_claim(leases: bool) -> str:
    """The app's claim (fairness and all), its candidates read from the queue, which it leases
    (or, kept in step by triggers, which its update of the runs leases)."""
    sql = QUERIES["claim_due_runs"].sql
    head, tail = sql.split("\nUPDATE job_runs r\n", 1)
    head = _replaced(head, "FROM job_runs", "FROM run_queue")
    head = _replaced(head, "r.status = 'pending' AND r.held IS NULL", "r.state = 0")
    head = _replaced(head, "status = 'pending' AND held IS NULL", "state = 0")
    if not leases:
        return head + "\nUPDATE job_runs r\n" + tail
    lease = tail[tail.index("make_interval(secs => ") :].split(")", 1)[0] + ")"
    leased = (
        ",\nleased AS (UPDATE run_queue u SET state = 1, lease_expires_at = now() + "
        f"{lease} FROM chosen c WHERE u.id = c.id AND u.scheduled_at = c.scheduled_at "
        "RETURNING u.id, u.scheduled_at)"
    )
    return head + leased + "\nUPDATE job_runs r\n" + _replaced(tail, "FROM chosen", "FROM leased")


def _narrow_start() -> str:
    """The app's start; an inline run's queue row goes, a started one's carries its new lease."""
    sql = _replaced(
        QUERIES["start_runs"].sql,
        "RETURNING r.id, r.attempt",
        "RETURNING r.id, r.scheduled_at, r.attempt, r.status, r.lease_expires_at",
    )
    return (
        f"WITH s AS ({sql}),\n"
        "gone AS (DELETE FROM run_queue q USING s WHERE q.id = s.id AND q.scheduled_at = s.scheduled_at "
        "AND s.status = 'succeeded'),\n"
        "running AS (UPDATE run_queue q SET state = 2, lease_expires_at = s.lease_expires_at FROM s "
        "WHERE q.id = s.id AND q.scheduled_at = s.scheduled_at AND s.status = 'running')\n"
        "SELECT id, attempt FROM s"
    )


def _narrow_finish() -> str:
    """The app's finish; an ended run's queue row goes, a retried one's is pending again."""
    sql = QUERIES["finish_runs"].sql
    return (
        f"WITH f AS ({sql}),\n"
        "gone AS (DELETE FROM run_queue q USING f WHERE q.id = f.id AND q.scheduled_at = f.scheduled_at "
        "AND f.status <> 'pending'),\n"
        "again AS (UPDATE run_queue q SET state = 0, due_at = f.due_at, lease_expires_at = NULL FROM f "
        "WHERE q.id = f.id AND q.scheduled_at = f.scheduled_at AND f.status = 'pending')\n"
        "SELECT * FROM f"
    )


ECHO_RESULT = StoredResult("{}")


@dataclasses.dataclass
class Succeeded:
    """A python run's outcome as the worker hands it to finish_runs: the echo handler's success."""

    ok: bool = True
    error: str | None = None
    http_status: int | None = None
    retry_after: float | None = None
    result: StoredResult = ECHO_RESULT
    outcome: str = "succeeded"


class Backend:
    """The CPU one Postgres backend has used (user + system, from /proc), and the WAL written."""

    def __init__(self, conn: asyncpg.Connection, pid: int):
        self.conn = conn
        self.stat = Path(f"/proc/{pid}/stat")
        self.tick = os.sysconf("SC_CLK_TCK")
        if not self.stat.exists():
            raise RuntimeError("`queue` reads a Postgres backend's CPU from /proc: run Postgres on this host")

    def cpu(self) -> float:
        fields = self.stat.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self.tick

    async def wal(self) -> int:
        return int(await self.conn.fetchval("SELECT pg_current_wal_lsn() - '0/0'"))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=int, help="runs per variant, target and round (default 20000; smoke 500)")
    p.add_argument("--rounds", type=int, help="rounds, variants rotated (default 3; smoke 1)")
    p.add_argument("--tenants", type=int, default=50)


async def _prepare(conn: asyncpg.Connection, v: Variant, tenants: int) -> None:
    await workload.seed_tenants(conn, tenants)
    if not v.narrow:
        return
    for index in STATUS_INDEXES:
        await conn.execute(f"DROP INDEX {index}")
    for _, part in await conn.fetch(PARTITIONS):
        await conn.execute(f'ALTER TABLE "{part}" SET (fillfactor = {v.fillfactor})')
    await conn.execute(QUEUE_DDL)
    if v.triggers:
        await conn.execute(QUEUE_TRIGGERS)


async def _lifecycle(
    conn: asyncpg.Connection, bench: Bench, v: Variant, n: int, tenants: int, python: bool
) -> dict[str, float]:
    """One variant's insert, claim, start (and finish): CPU µs and WAL bytes per run by phase."""
    s = bench.settings()
    backend = Backend(conn, await conn.fetchval("SELECT pg_backend_pid()"))
    target = workload.ECHO if python else workload.NOOP
    out: dict[str, float] = {}
    wal0 = await backend.wal()

    async def phase(name: str, work: Any) -> Any:
        cpu0, t0 = backend.cpu(), time.perf_counter()
        got = await work
        out[f"{name}_cpu"] = (backend.cpu() - cpu0) / n * 1e6
        out[f"{name}_wall"] = (time.perf_counter() - t0) / n * 1e6
        return got

    now = await workload.fetchval(conn, "clock")
    binds = dict(n=n, tenants=tenants, target=target, first_at=now - timedelta(seconds=60), step=60 / n)
    if v.explicit:
        await phase("insert", conn.execute(_narrow_insert(), *workload.SQL["insert_backlog"].args(binds)))
    else:
        await phase("insert", workload.execute(conn, "insert_backlog", **binds))
    await conn.execute("ANALYZE")

    claim = QUERIES["claim_due_runs"]
    claim_binds = dict(
        min_priority=0,
        max_priority=9,
        floor=now - timedelta(days=1),
        ceiling=now + timedelta(minutes=1),
        batch_size=s.batch_size,
        per_tenant_cap=s.per_tenant_cap,
        owner=s.owner,
        lease_seconds=s.dispatch_lease_seconds,
    )
    claim_sql = _narrow_claim(leases=not v.triggers) if v.narrow else claim.sql

    async def claim_all() -> list[asyncpg.Record]:
        claimed: list[asyncpg.Record] = []
        while len(claimed) < n:
            rows = await conn.fetch(claim_sql, *claim.args(claim_binds))
            if not rows:
                raise RuntimeError(f"{v.name}: the claim stopped at {len(claimed)} of {n} runs")
            claimed += rows
        return claimed

    claimed = await phase("claim", claim_all())
    fences = [
        Fence([(r["id"], r["scheduled_at"], r["epoch"]) for r in claimed[i : i + START_BATCH]])
        for i in range(0, n, START_BATCH)
    ]

    async def start_all() -> None:
        start = QUERIES["start_runs"]
        sql = _narrow_start() if v.explicit else start.sql
        for fence in fences:
            inline = [not python] * len(fence.ids)
            values = dict(inline=inline, owner=s.owner, lease_seconds=s.lease_seconds, **fence.binds())
            got = await conn.fetch(sql, *start.args(values))
            if len(got) != len(fence.ids):
                raise RuntimeError(f"{v.name}: {len(got)} of {len(fence.ids)} runs started")

    async def finish_all() -> None:
        finish = QUERIES["finish_runs"]
        sql = _narrow_finish() if v.explicit else finish.sql
        for fence in fences:
            values = transitions.finish_binds(fence, [Succeeded() for _ in fence.ids])
            got = await conn.fetch(sql, *finish.args(values))
            if len(got) != len(fence.ids):
                raise RuntimeError(f"{v.name}: {len(got)} of {len(fence.ids)} runs finished")

    await phase("start", start_all())
    if python:
        await phase("finish", finish_all())
    out["wal_bytes"] = (await backend.wal() - wal0) / n
    done = await workload.count_status(conn, "succeeded")
    if done != n:
        raise RuntimeError(f"{v.name}: {done} of {n} runs succeeded")
    if v.narrow and await conn.fetchval("SELECT count(*) FROM run_queue"):
        raise RuntimeError(f"{v.name}: ended runs left in the queue table")
    stored = await conn.fetchval(f"SELECT sum(pg_total_relation_size(oid)) FROM ({PARTITIONS}) AS p")
    out["stored_bytes"] = stored / n
    # Table statistics reach the views when the backend next goes idle, at most once a second.
    await conn.execute("SELECT pg_stat_force_next_flush()")
    out["hot_share"] = await conn.fetchval(
        "SELECT sum(n_tup_hot_upd)::float8 / greatest(sum(n_tup_upd), 1) FROM pg_stat_user_tables "
        "WHERE relname LIKE 'job_runs_%'"
    )
    return out


PHASES = ("insert", "claim", "start", "finish")


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    report = await begin(bench, NAME)
    n = sized(args.runs, full=20_000, smoke=500, is_smoke=bench.smoke)
    rounds = sized(args.rounds, full=3, smoke=1, is_smoke=bench.smoke)
    s = bench.settings()
    report.workload = {
        "runs per variant, target and round": n,
        "rounds": rounds,
        "tenants": args.tenants,
        "claim batch / per-tenant cap": f"{s.batch_size} / {s.per_tenant_cap}",
        "start and finish batch": START_BATCH,
        "variants": ", ".join(v.name for v in VARIANTS),
        "narrow": "job_runs without " + ", ".join(STATUS_INDEXES) + "; run_queue beside it",
    }
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    targets = ("noop", "python")
    with tqdm(total=rounds * len(VARIANTS) * len(targets) * n, desc=NAME, unit="run", leave=False) as bar:
        for r in range(rounds):
            order = VARIANTS[r % len(VARIANTS) :] + VARIANTS[: r % len(VARIANTS)]
            for target in targets:
                for v in order:
                    async with bench.database() as url:
                        conn = await connect(url, name="bench-queue")
                        try:
                            await _prepare(conn, v, args.tenants)
                            got = await _lifecycle(conn, bench, v, n, args.tenants, target == "python")
                        finally:
                            await conn.close()
                    results.setdefault((target, v.name), []).append(got)
                    bar.update(n)

    def med(target: str, name: str, key: str) -> float:
        return statistics.median(x.get(key, 0.0) for x in results[(target, name)])

    def total(x: dict[str, float]) -> float:
        return sum(x.get(f"{p}_cpu", 0.0) for p in PHASES)

    for target in targets:
        base = statistics.median(total(x) for x in results[(target, AS_IS)])
        phases = [p for p in PHASES if target == "python" or p != "finish"]
        rows = []
        for v in VARIANTS:
            runs = results[(target, v.name)]
            cpu = statistics.median(total(x) for x in runs)
            rows.append(
                [
                    v.name,
                    *[med(target, v.name, f"{p}_cpu") for p in phases],
                    cpu,
                    cpu / base,
                    med(target, v.name, "wal_bytes"),
                    med(target, v.name, "stored_bytes"),
                    f"{med(target, v.name, 'hot_share'):.0%}",
                    " / ".join(f"{total(x):.1f}" for x in runs),
                ]
            )
        report.table(
            f"{target} runs: Postgres backend CPU per run, µs (median of rounds)",
            ["variant", *phases, "total", "x as is", "WAL B/run", "stored B/run", "HOT", "rounds (total)"],
            rows,
        )
    report.data = {"results": {f"{t}/{name}": v for (t, name), v in results.items()}}
    report.notes.append(
        "CPU is the one backend's that ran the statements (user + system, /proc, clock ticks), commits "
        "included; the WAL writer's and the checkpointer's work is not in it. WAL is the cluster's "
        "insert position diffed over the lifecycle (other databases' writes count: read it on a quiet "
        "host). Stored bytes are job_runs' partitions with their indexes at the end, before any VACUUM: "
        "dead versions count (fillfactor 50 leaves half of each page free for HOT updates, which then "
        "stay on the page instead of adding versions elsewhere)."
    )
    report.not_mean = (
        "A prototype priced in isolation: one connection, each statement after the last, no engine, "
        "worker or NATS, so these are neither a drain's figures nor what Postgres costs when the four "
        "processes share the cores (`drain` and `peers` measure that). The narrow variants price the "
        "statements a narrow queue would run on the hot path, not the rest of such a change (cancels, "
        "retries, holds, the reapers, the dashboard, migrating a live table), which this does not "
        "build. " + shared_host(report, "Postgres")
    )
    return report
