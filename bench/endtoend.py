"""One end-to-end drain through real processes — one `scheduler engine` and K `scheduler worker`
subprocesses, configured by environment as deployed, app defaults — timed from the moment the
backlog falls due until every run is `succeeded` in Postgres, in a fresh database of its own.

Shared by `drain`, `workers` and `peers`. The processes start first and wait, ready; the backlog is
then committed in one transaction due a moment later (with the NOTIFY a submission sends), and the
bench NOTIFYs again at the due instant, so neither process start-up nor the engine's idle poll
interval is in the figure. CPU per process comes from /proc, Postgres's work from its statistics
views (bench.pgstats), both diffed over the drain including the backlog's insert."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.db.connection import create_pool
from bench import pgstats, workload
from bench.measure import cpu_seconds, wait_for_count
from bench.procs import SchedulerProcess, ops_process, running, scrape_all
from bench.scenarios._common import engine_summary, worker_summary
from bench.stack import Bench, delete_stream

PS = [0.5, 0.95, 0.99]


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
) -> Drain:
    """`overrides`: settings of the processes beside the app's defaults (another NATS_URL, say)."""
    lead = 0.5 + n / 10_000  # room to commit the backlog before it falls due
    async with bench.database() as url:
        base = bench.settings(url, **(overrides or {}))
        engine = ops_process("engine", base, bench.logs)
        # The drain is over once every outcome is recorded; a worker slow to exit (its shutdown once
        # waited out nc.drain()'s 30 s timeout) is killed after a few seconds and reported.
        names = ["worker"] if workers == 1 else [f"worker{i + 1}" for i in range(workers)]
        ws = [ops_process("worker", base, bench.logs, name=name, stop_timeout=5.0) for name in names]
        procs: list[SchedulerProcess] = [engine, *ws]
        pool = await create_pool(url, min_size=1, max_size=2, name="bench-drain")
        nc = await bench.nats(base.nats_url)
        try:
            async with pool.acquire() as conn:
                await workload.seed_tenants(conn, tenants)
            async with running(procs):
                before = await scrape_all(procs)
                pids = {"engine": engine.pid} | {f"{name}": w.pid for name, w in zip(names, ws, strict=True)}
                pg_before = await pgstats.snapshot(url)
                cpu_before = cpu_seconds(pids)
                async with pool.acquire() as conn:
                    due_at, start = await workload.due_burst(
                        conn, n, tenants, lead, analyze=analyze, target=target
                    )
                    await workload.wake_at(conn, start, due_at)

                async def succeeded() -> int:
                    async with pool.acquire() as c:
                        return await workload.count_status(c, "succeeded")

                done = await wait_for_count(succeeded, n, desc="drain", interval=interval, timeout=timeout)
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
    if not alive:
        result.notes.append("a process exited during the drain; see its log under the bench's temp dir")
    if any(w.killed for w in ws):
        result.notes.append(
            "a worker did not exit within 5 s of SIGTERM and was killed, after every outcome was recorded "
            "(see its log): a shutdown problem of the worker, not part of the figures."
        )
    return result


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
