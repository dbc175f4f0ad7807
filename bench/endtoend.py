"""One end-to-end drain through real processes — one `scheduler engine` and K `scheduler worker`
subprocesses, configured by environment as deployed, app defaults — timed from the moment the
backlog falls due until every run is `succeeded` in Postgres, in a fresh database of its own.

The end is watched on the workers' own count of the successes they recorded (a counter each raises
once the write that records them has committed), then checked once in Postgres, the truth: polled
there, the count of `succeeded` runs scanned the day's partition every poll, work charged to ours
alone (a peer's count reads a queue that empties), 2.8 µs of Postgres's CPU a run at 40k runs and
more the larger the drain (docs/bench.md verdict 43).

Shared by `drain`, `workers` and `peers`. The processes start first and wait, ready; the backlog is
then committed in one transaction due a moment later (with the NOTIFY a submission sends), and the
bench NOTIFYs again at the due instant, so neither process start-up nor the engine's idle poll
interval is in the figure. CPU per process comes from /proc, Postgres's work from its statistics
views (bench.pgstats), both diffed over the drain including the backlog's insert."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx

from app.db.connection import create_pool
from app.db.queries import Conn
from app.dev import free_port
from bench import api_backlog, pgstats, workload
from bench.measure import cpu_seconds, wait_for_count
from bench.procs import SchedulerProcess, ops_process, running, scrape_all
from bench.scenarios._common import engine_summary, worker_summary
from bench.stack import Bench, delete_stream

PS = [0.5, 0.95, 0.99]
# A worker's successes recorded so far: the series worker_summary reads as "succeeded", found by its
# line while the drain is polled. SchedulerProcess.scrape() opens a client a call (~30 ms here) and
# parses every family (~2 ms); one client, this line and only its family asked for (`name[]`, so the
# worker does not render its whole exposition for the bench, ~4 % of its CPU in a drain) cost less.
_OUTCOMES = "scheduler_run_outcomes_total"
_RECORDED = re.compile(rf'^{_OUTCOMES}\{{status="succeeded"\}} (\S+)$', re.MULTILINE)


@dataclass
class Drain:
    runs: int
    wall: float
    cpu: dict[str, float]  # CPU seconds by process label
    postgres: pgstats.Work
    lags: Any
    counts: dict[str, tuple[int, int]]
    engine: dict[str, float]
    workers: list[dict[str, float]]
    settings: dict[str, Any]
    notes: list[str] = field(default_factory=list)


async def drain(
    bench: Bench,
    n: int,
    *,
    tenants: int,
    target: dict[str, str] = workload.NOOP,
    analyze: bool = True,
    timeout: float = 600.0,
    workers: int = 1,
    interval: float = 0.25,
    overrides: dict[str, Any] | None = None,
    shape: str = "interleaved",
) -> Drain:
    """`overrides`: settings of the processes beside the app's defaults (another NATS_URL, say).
    `shape`: the backlog's (workload.SHAPES); `api` submits it through a `scheduler api` process
    (SCHEDULER_ENGINE=off: API, engine and workers each a process of their own, as deployed)."""
    # Room to commit the backlog before it falls due (through the API: to submit it, at a pace this
    # shared machine keeps even when busy).
    lead = 0.5 + n / 10_000 if shape != "api" else 2.0 + n / 2_000
    late = False  # the API's submission ended after the runs fell due
    async with bench.database() as url:
        base = bench.settings(url, **(overrides or {}))
        engine = ops_process("engine", base, bench.logs)
        # The drain is over once every outcome is recorded; a worker slow to exit (its shutdown once
        # waited out nc.drain()'s 30 s timeout) is killed after a few seconds and reported.
        names = ["worker"] if workers == 1 else [f"worker{i + 1}" for i in range(workers)]
        ws = [ops_process("worker", base, bench.logs, name=name, stop_timeout=5.0) for name in names]
        procs: list[SchedulerProcess] = [engine, *ws]
        api = SchedulerProcess(
            "api", base.model_copy(update={"engine": "off", "port": free_port()}), bench.logs
        )
        pool = await create_pool(url, min_size=1, max_size=2, name="bench-drain")
        nc = await bench.nats(base.nats_url)
        try:
            if shape != "api":
                async with pool.acquire() as conn:
                    await workload.seed_tenants(conn, tenants)
            async with running([*([api] if shape == "api" else []), *procs]):
                auths = await _api_tenants(api, tenants, target) if shape == "api" else []
                before = await scrape_all(procs)
                pids = {"engine": engine.pid} | {f"{name}": w.pid for name, w in zip(names, ws, strict=True)}
                pids |= {"api": api.pid} if shape == "api" else {}
                pg_before = await pgstats.snapshot(url)
                cpu_before = cpu_seconds(pids)
                async with pool.acquire() as conn:
                    if shape == "api":
                        due_at, start, late = await _api_burst(conn, api, auths, n, lead, analyze)
                    else:
                        due_at, start = await workload.due_burst(
                            conn, n, tenants, lead, analyze=analyze, target=target, shape=shape
                        )
                    await workload.wake_at(conn, start, due_at)

                async def succeeded() -> int:
                    async with pool.acquire() as c:
                        return await workload.count_status(c, "succeeded")

                recorded_before = sum(worker_summary(b)["succeeded"] for b in before[1:])
                async with httpx.AsyncClient(timeout=5.0) as client:

                    async def recorded() -> int:
                        return int(sum([await _recorded(client, w) for w in ws]) - recorded_before)

                    done = await wait_for_count(recorded, n, desc="drain", interval=interval, timeout=timeout)
                if await succeeded() < n:  # Postgres disagrees: its count decides
                    done = await wait_for_count(
                        succeeded, n, desc="drain", interval=interval, timeout=timeout
                    )
                cpu_after = cpu_seconds(pids)
                after = await scrape_all(procs)
                alive = all(p.alive() for p in procs)
            async with pool.acquire() as conn:
                lags = (await workload.fetch(conn, "lag_percentiles", ps=PS, tenant=None))[0]
                counts = await workload.status_counts(conn)
        finally:
            await delete_stream(nc, base)
            await nc.close()
            await pool.close()
        pg_after = await pgstats.snapshot(url)  # the processes are gone: their counters are in
    result = Drain(
        runs=n,
        wall=done - start,
        cpu={k: cpu_after[k] - cpu_before[k] for k in cpu_after},
        postgres=pgstats.work(pg_before, pg_after, n),
        lags=lags,
        counts=counts,
        engine=engine_summary(after[0] - before[0]),
        workers=[worker_summary(a - b) for a, b in zip(after[1:], before[1:], strict=True)],
        settings={
            "batch_size": base.batch_size,
            "worker_concurrency": base.worker_concurrency,
            "worker_fetch_batch": base.worker_fetch_batch,
        },
    )
    if late:
        result.notes.append(
            "the API submission ended after the runs' due instant: the drain is timed from its end, and "
            "runs claimed while it was still submitting make the rate look better than it is."
        )
    if not alive:
        result.notes.append("a process exited during the drain; see its log under the bench's temp dir")
    if any(w.killed for w in ws):
        result.notes.append(
            "a worker did not exit within 5 s of SIGTERM and was killed, after every outcome was recorded "
            "(see its log): a shutdown problem of the worker, not part of the figures."
        )
    return result


async def _recorded(client: httpx.AsyncClient, worker: SchedulerProcess) -> float:
    r = await client.get(f"{worker.base_url}/metrics", params={"name[]": _OUTCOMES})
    r.raise_for_status()
    found = _RECORDED.search(r.text)
    return float(found.group(1)) if found else 0.0


async def _api_tenants(
    api: SchedulerProcess, tenants: int, target: dict[str, str]
) -> list[tuple[str, dict[str, str]]]:
    async with httpx.AsyncClient(base_url=api.base_url, timeout=60.0) as client:
        return await api_backlog.create_tenants(client, tenants, target)


async def _api_burst(
    conn: Conn,
    api: SchedulerProcess,
    auths: list[tuple[str, dict[str, str]]],
    n: int,
    lead: float,
    analyze: bool,
) -> tuple[Any, float, bool]:
    """The backlog through the API, due `lead` seconds from now (database clock); returns (due_at,
    the perf_counter() at which the drain starts: the due instant or the submission's end, if later,
    and whether it was later)."""
    offset = await workload.clock_offset(conn)
    due_at = await workload.fetchval(conn, "clock") + timedelta(seconds=lead)
    async with httpx.AsyncClient(base_url=api.base_url, timeout=120.0) as client:
        ended = await api_backlog.submit(client, auths, n, due_at)
    if analyze:
        await conn.execute("ANALYZE job_runs, run_queue")
    due = time.perf_counter() + (due_at.timestamp() - offset - time.time())
    return due_at, max(ended, due), ended > due


def cpu_rows(cpu: dict[str, float], n: int, wall: float) -> list[list[Any]]:
    """process, CPU seconds, µs per run, cores busy — and the total."""
    total = sum(cpu.values())
    return [[k, v, v / n * 1e6, v / wall] for k, v in cpu.items()] + [
        ["total", total, total / n * 1e6, total / wall]
    ]


CPU_COLUMNS = ["process", "CPU seconds", "us per run", "cores busy"]
CPU_TITLE = (
    "CPU used during the drain, by process (from /proc; 'postgres' and 'nats-server' are every process "
    "of that name on this host, other users' included)"
)


def shape_table(drains: dict[str, Drain], n: int) -> tuple[str, list[str], list[list[Any]]]:
    """Rate and CPU per run of each shape's drain: a report table's title, columns and rows."""
    labels: list[str] = []
    for d in drains.values():
        labels += [k for k in d.cpu if k not in labels]
    rows = [
        [shape, n / d.wall, *[d.cpu.get(k, 0.0) / n * 1e6 for k in labels], sum(d.cpu.values()) / n * 1e6]
        for shape, d in drains.items()
    ]
    title = "By backlog shape: runs/s and CPU per run by process (µs, /proc)"
    return title, ["shape", "runs/s", *labels, "total"], rows
