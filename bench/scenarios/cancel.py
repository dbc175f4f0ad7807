"""cancel (end to end): how soon a cancelled running run stops. N webhook runs hang at a local
receiver, spread over two `scheduler worker` processes (half each: one serves the urgent lane, the
other the normal one, and half the runs are urgent), dispatched by a `scheduler engine`; an API
process (ENGINE=off, so each notice goes API process -> NATS -> worker process) cancels them, one
POST /runs/{id}/cancel after the other, then, in a second round, all at once with one bulk cancel
by filter.

Per run: from sending the cancel to the receiver seeing the worker's connection close (the receiver
is told by its server when the caller hangs up, not by polling), and to `cancelled` in Postgres
(the run's finished_at, the cancel statement's own time). Both clocks are this host's. It checks
that every run ended `cancelled` with its attempt `cancelled` and was called once (no retry)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import Response

from app.db.connection import create_pool
from app.dev import free_port
from bench.measure import latency_ms
from bench.procs import SchedulerProcess, ops_process, running, scrape_all
from bench.report import Report
from bench.scenarios._common import begin, loopback_hook, shared_host, sized
from bench.stack import ADMIN_TOKEN, Bench, delete_stream

NAME = "cancel"
HELP = (
    "N hanging webhook runs over 2 workers cancelled: cancel -> connection closed, -> cancelled in Postgres"
)
LANES = ("urgent", "normal")
URGENT, NORMAL = 0, 9  # priorities
STOPPED = "scheduler_worker_attempts_stopped_total"


class HangingHook:
    """A webhook that never answers; records when each run's call arrived and when its caller hung
    up (time.perf_counter()), by run id."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.closed: dict[str, float] = {}
        self.calls: Counter[str] = Counter()

    async def handle(self, request: Request) -> Response:
        await request.body()
        run_id = request.headers["scheduler-run-id"]
        self.calls[run_id] += 1
        self.arrived[run_id] = time.perf_counter()
        while (await request.receive())["type"] != "http.disconnect":  # the server says when it closes
            pass
        self.closed[run_id] = time.perf_counter()
        return Response(status_code=504)


@contextlib.asynccontextmanager
async def hanging_hook() -> AsyncIterator[tuple[str, HangingHook]]:
    hook = HangingHook()
    async with loopback_hook(hook.handle) as url:
        yield url, hook


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=int, help="hanging runs per round (default 100; smoke 10)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a round may take")


async def until(check: Any, what: str, timeout: float) -> None:
    deadline = time.perf_counter() + timeout
    while not await check():
        if time.perf_counter() > deadline:
            raise TimeoutError(f"cancel: {what} not within {timeout:g}s")
        await asyncio.sleep(0.05)


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    report = await begin(bench, NAME)
    n = sized(args.runs, full=100, smoke=10, is_smoke=bench.smoke)
    async with bench.database() as url, hanging_hook() as (hook_url, hook):
        # Half the runs urgent, half not, and a worker for each lane: each worker runs exactly its
        # half (from one stream, whichever worker fetched first could take them all).
        base = bench.settings(url, worker_concurrency=n)
        engine = ops_process("engine", base, bench.logs)
        workers = [
            ops_process("worker", base.model_copy(update={"lanes": lane}), bench.logs, name=f"worker-{lane}")
            for lane in LANES
        ]
        api = SchedulerProcess(
            "api", base.model_copy(update={"port": free_port(), "engine": "off"}), bench.logs
        )
        pool = await create_pool(url, min_size=1, max_size=2, name="bench-cancel")
        rounds: dict[str, dict[str, Any]] = {}
        try:
            async with (
                running([api, engine, *workers]),
                httpx.AsyncClient(base_url=api.base_url, timeout=30) as client,
            ):
                auth = await _tenant(client, hook_url)
                for mode in ("single", "bulk"):
                    before = await scrape_all(workers)
                    rounds[mode] = await _round(client, auth, pool, hook, n, mode, args.timeout)
                    after = await scrape_all(workers)
                    rounds[mode]["per_worker"] = [
                        (a - b).value(STOPPED, via="notice") for a, b in zip(after, before, strict=True)
                    ]
                    rounds[mode]["by_heartbeat"] = sum(
                        (a - b).value(STOPPED, via="heartbeat") for a, b in zip(after, before, strict=True)
                    )
                api_metrics = await api.scrape()
        finally:
            await pool.close()
            nc = await bench.nats()
            await delete_stream(nc, base)
            await nc.close()
    report.workload = {
        "runs per round": n,
        "processes": "1 api (ENGINE=off), 1 engine, 2 workers (one a lane: half the runs are urgent)",
        "rounds": "single (one POST /runs/{id}/cancel after the other), bulk (one bulk cancel by filter)",
        "target": "http on loopback, never answering",
    }
    _figures(report, rounds, api_metrics.value("scheduler_cancel_notices_total", result="unsent"))
    return report


async def _tenant(client: httpx.AsyncClient, hook_url: str) -> dict[str, str]:
    r = await client.post("/tenants", json={"id": "t000"}, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    r.raise_for_status()
    auth = {"Authorization": f"Bearer {r.json()['api_key']}"}
    job = {"target": {"type": "http", "url": hook_url}, "max_attempts": 3, "timeout_seconds": 600}
    (await client.put("/tenants/t000/jobs/hang", json=job, headers=auth)).raise_for_status()
    return auth


async def _round(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    pool: Any,
    hook: HangingHook,
    n: int,
    mode: str,
    timeout: float,
) -> dict[str, Any]:
    """Submits n hanging runs, waits until every one is at the receiver, cancels them; the latencies."""
    runs = [{"job": "hang", "priority": URGENT if i % 2 else NORMAL} for i in range(n)]
    r = await client.post("/tenants/t000/runs/batch", json={"runs": runs}, headers=auth)
    r.raise_for_status()
    ids = [run["id"] for run in r.json()["runs"]]

    async def all_arrived() -> bool:
        return all(i in hook.arrived for i in ids)

    await until(all_arrived, "every call at the receiver", timeout)
    sent: dict[str, tuple[float, float]] = {}  # run id -> (perf_counter, wall clock) at the cancel
    if mode == "single":
        for run_id in ids:
            sent[run_id] = (time.perf_counter(), time.time())
            (await client.post(f"/runs/{run_id}/cancel", headers=auth)).raise_for_status()
    else:
        at = (time.perf_counter(), time.time())
        body = {"action": "cancel", "filter": {"job": "hang", "status": ["running"]}}
        r = await client.post("/tenants/t000/runs/actions", json=body, headers=auth)
        r.raise_for_status()
        assert r.json()["changed"] == n, r.json()
        sent = dict.fromkeys(ids, at)

    async def all_closed() -> bool:
        return all(i in hook.closed for i in ids)

    await until(all_closed, "every connection closed", timeout)
    await asyncio.sleep(1.0)  # a retry, had one followed, would reach the receiver by now
    rows = await pool.fetch(
        "SELECT id::text AS id, status, finished_at, attempts -> -1 ->> 'outcome' AS outcome"
        " FROM job_runs WHERE id = ANY($1::uuid[])",
        ids,
    )
    finished: dict[str, datetime] = {r["id"]: r["finished_at"] for r in rows}
    coherent = sum(r["status"] == "cancelled" and r["outcome"] == "cancelled" for r in rows)
    return {
        "closed": latency_ms([hook.closed[i] - sent[i][0] for i in ids]),
        "cancelled": latency_ms([finished[i].timestamp() - sent[i][1] for i in ids]),
        "coherent": coherent,
        "called_again": sum(hook.calls[i] > 1 for i in ids),
    }


def _figures(report: Report, rounds: dict[str, dict[str, Any]], unsent: float) -> None:
    rows = []
    for mode, r in rounds.items():
        for what in ("closed", "cancelled"):
            lat = r[what]
            label = "connection closed" if what == "closed" else "cancelled in Postgres"
            rows.append(
                [mode, f"cancel -> {label}", lat["p50_ms"], lat["p99_ms"], lat["max_ms"], lat["samples"]]
            )
    report.table("From sending the cancel (ms)", ["round", "to", "p50", "p99", "max", "runs"], rows)
    report.table(
        "Checks",
        [
            "round",
            "runs cancelled, attempt cancelled",
            "runs called again",
            "stopped by notice, per worker",
            "by heartbeat",
        ],
        [
            [
                mode,
                r["coherent"],
                r["called_again"],
                " / ".join(f"{v:.0f}" for v in r["per_worker"]),
                r["by_heartbeat"],
            ]
            for mode, r in rounds.items()
        ],
    )
    report.notes.append(f"cancel notices the API could not send: {unsent:.0f}")
    report.data = {"rounds": rounds}
    report.not_mean = (
        "Latency on loopback with idle workers: on a network add its round trips, and a busy worker's "
        "event loop delays the abort by its own lag. The bulk round's figures include the bulk "
        "statement's time for every run (one cancel for all). "
        + shared_host(report, "Postgres, NATS, the API, the engine and both workers")
    )
