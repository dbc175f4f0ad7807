"""ingest: API throughput through real HTTP. A `scheduler api` subprocess (SCHEDULER_ENGINE=off, so
only ingest is measured); a tenant created with the admin token and a noop job through the API; then
(1) single POST /tenants/{t}/runs at bounded concurrency for D seconds — req/s and latency — and
(2) POST /tenants/{t}/runs/batch with 1000 runs per request — runs/s."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import tempfile
import time
from typing import Any

import httpx

from app.dev import free_port
from bench.measure import latency_ms, rate
from bench.procs import SchedulerProcess, running
from bench.report import Report
from bench.scenarios import _ingest_rules
from bench.scenarios._common import api_tenant, begin, shared_host, sized
from bench.stack import Bench

NAME = "ingest"
HELP = "API ingest over real HTTP: single POST /runs (req/s, p50/p99) and /runs/batch x1000 (runs/s)"
TENANT = "ingest"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--duration", type=float, help="seconds of single-run load (default 10; smoke 2)")
    p.add_argument("--concurrency", type=int, default=32, help="requests in flight for single runs (httpx)")
    p.add_argument(
        "--wrk-connections",
        default="4,8,16,32",
        help="connection counts of the wrk sweep of single runs (comma-separated)",
    )
    p.add_argument("--batches", type=int, help="batch requests of 1000 runs (default 30; smoke 3)")
    p.add_argument("--batch-concurrency", type=int, default=2, help="batch requests in flight")
    p.add_argument(
        "--rules",
        default="",
        help="also compare submissions by job rule, alternated in rounds: a comma-separated list of "
        + ", ".join(_ingest_rules.KINDS)
        + " (e.g. plain,unique,duplicate,debounce)",
    )
    p.add_argument("--rule-rounds", type=int, default=3, help="rounds of the --rules comparison")
    p.add_argument("--rule-batches", type=int, default=2, help="batches of 1000 per kind and round")


async def _load(
    client: httpx.AsyncClient,
    path: str,
    body: Any,
    headers: dict[str, str],
    *,
    concurrency: int,
    duration: float | None = None,
    requests: int | None = None,
) -> tuple[list[float], int, float]:
    """(latencies of 201s, non-201 count, wall seconds) of a closed loop of `concurrency` clients."""
    latencies: list[float] = []
    errors = 0
    remaining = requests
    t0 = time.perf_counter()
    deadline = t0 + (duration or 0.0)

    async def one_client() -> None:
        nonlocal errors, remaining
        while True:
            if duration is not None and time.perf_counter() >= deadline:
                return
            if remaining is not None:
                if remaining <= 0:
                    return
                remaining -= 1
            start = time.perf_counter()
            r = await client.post(path, json=body, headers=headers)
            if r.status_code == 201:
                latencies.append(time.perf_counter() - start)
            else:
                errors += 1

    await asyncio.gather(*(one_client() for _ in range(concurrency)))
    return latencies, errors, time.perf_counter() - t0


_WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = '{"job": "noop"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "%s"
"""
_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not match:
        raise ValueError(f"unexpected wrk latency {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


async def _wrk(url: str, authorization: str, connections: int, duration: float) -> dict[str, float]:
    """Single POSTs driven by wrk (a C load generator), so the client's own CPU cost stays far below
    the server's on a machine where they share cores. Only used when wrk is installed."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(_WRK_SCRIPT % authorization)
    proc = await asyncio.create_subprocess_exec(
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{max(1, round(duration))}s",
        "--latency",
        "-s",
        script.name,
        url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out = (await proc.communicate())[0].decode()
    os.unlink(script.name)
    pct = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", out, re.MULTILINE))
    total = re.search(r"(\d+) requests in ([\d.]+)s", out)
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if not total or "50" not in pct:
        raise RuntimeError(f"wrk output not understood:\n{out}")
    return {
        "requests": float(total.group(1)),
        "seconds": float(total.group(2)),
        "req_s": float(total.group(1)) / float(total.group(2)),
        "p50_ms": _ms(pct["50"]),
        "p99_ms": _ms(pct["99"]),
        "errors": float(non_2xx.group(1)) if non_2xx else 0.0,
    }


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    report = await begin(bench, NAME)
    duration: float = args.duration if args.duration is not None else (2.0 if bench.smoke else 10.0)
    batches = sized(args.batches, full=30, smoke=3, is_smoke=bench.smoke)
    async with bench.database() as url:
        s = bench.settings(url, engine="off", port=free_port())
        api = SchedulerProcess("api", s, bench.logs)
        report.workload = {
            "process": "1 scheduler api (uvicorn, one process), SCHEDULER_ENGINE=off",
            "single runs": f"{duration:g} s per client and concurrency",
            "batch runs": f"{batches} x 1000 runs, {args.batch_concurrency} in flight",
            "job": "noop",
            "client": "httpx.AsyncClient in the bench process; wrk at "
            + args.wrk_connections
            + " connections when installed",
        }
        async with running([api]):
            limits = httpx.Limits(max_connections=max(args.concurrency, args.batch_concurrency))
            async with httpx.AsyncClient(base_url=api.base_url, timeout=30.0, limits=limits) as client:
                auth = await api_tenant(client, TENANT)
                single_path, batch_path = f"/tenants/{TENANT}/runs", f"/tenants/{TENANT}/runs/batch"
                print("  warming up, then single runs…", flush=True)
                await _load(
                    client,
                    single_path,
                    {"job": "noop"},
                    auth,
                    concurrency=4,
                    requests=20 if bench.smoke else 100,
                )
                single = await _load(
                    client,
                    single_path,
                    {"job": "noop"},
                    auth,
                    concurrency=args.concurrency,
                    duration=duration,
                )
                if shutil.which("wrk"):
                    sweep = []
                    for connections in [int(c) for c in args.wrk_connections.split(",")]:
                        print(f"  single runs again, driven by wrk, {connections} connections…", flush=True)
                        point = await _wrk(
                            api.base_url + single_path, auth["Authorization"], connections, duration
                        )
                        sweep.append({"connections": connections, **point})
                    report.data["wrk"] = sweep
                print("  batches of 1000…", flush=True)
                batch = await _load(
                    client,
                    batch_path,
                    {"runs": [{"job": "noop"}] * 1000},
                    auth,
                    concurrency=args.batch_concurrency,
                    requests=batches,
                )
                if args.rules:
                    await _ingest_rules.measure(report, client, TENANT, auth, args, duration)
    _figures(report, single, batch, args)
    return report


def _figures(
    report: Report,
    single: tuple[list[float], int, float],
    batch: tuple[list[float], int, float],
    args: argparse.Namespace,
) -> None:
    s_lat, s_err, s_wall = single
    b_lat, b_err, b_wall = batch
    s_stats, b_stats = latency_ms(s_lat), latency_ms(b_lat)
    req_s = rate(len(s_lat), s_wall)
    runs_s = rate(len(b_lat) * 1000, b_wall)
    report.table(
        "Ingest through HTTP",
        ["request", "in flight", "ok", "errors", "seconds", "req/s", "runs/s", "p50 ms", "p95 ms", "p99 ms"],
        [
            [
                "POST /runs",
                args.concurrency,
                len(s_lat),
                s_err,
                s_wall,
                req_s,
                req_s,
                s_stats["p50_ms"],
                s_stats["p95_ms"],
                s_stats["p99_ms"],
            ],
            [
                "POST /runs/batch (1000)",
                args.batch_concurrency,
                len(b_lat),
                b_err,
                b_wall,
                rate(len(b_lat), b_wall),
                runs_s,
                b_stats["p50_ms"],
                b_stats["p95_ms"],
                b_stats["p99_ms"],
            ],
        ],
    )
    sweep = report.data.get("wrk")
    if sweep:
        report.table(
            "Single POST /runs driven by wrk (a C client: its CPU cost does not crowd the server's)",
            ["connections", "requests", "non-2xx", "seconds", "req/s", "p50 ms", "p99 ms"],
            [
                [
                    p["connections"],
                    p["requests"],
                    p["errors"],
                    p["seconds"],
                    p["req_s"],
                    p["p50_ms"],
                    p["p99_ms"],
                ]
                for p in sweep
            ],
        )
        # Throughput at a latency bound: the best rate of the sweep whose p99 stays within 50 ms.
        within = [p for p in sweep if p["p99_ms"] <= 50 and p["errors"] == 0]
        best = max(within, key=lambda p: p["req_s"]) if within else min(sweep, key=lambda p: p["p99_ms"])
        report.target(
            f"single POST /runs with p99 <= 50 ms (wrk, best of the sweep: {best['connections']} "
            f"connections, p99 {best['p99_ms']:.1f} ms)",
            best["req_s"] if within else 0.0,
            ">=",
            500,
            " req/s",
        )
    else:
        report.notes.append(
            "wrk is not installed: single POSTs were measured with httpx only, whose own CPU cost "
            "bounds the figure; no single-POST target is judged."
        )
    report.target("batch POST /runs/batch", runs_s, ">=", 10_000, " runs/s")
    report.notes.append(
        "Closed loop: each of the in-flight clients sends its next request when the previous one answers, so "
        "latency includes queueing inside the API at that concurrency; ok counts only 201 answers. The "
        "httpx row is the bench process's own client, whose per-request CPU is of the order of the "
        "server's on these shared cores: it bounds that figure, which is why the target is judged on wrk."
    )
    report.data.update(
        {
            "single": {**s_stats, "req_s": req_s, "errors": s_err},
            "batch": {**b_stats, "runs_s": runs_s, "errors": b_err},
        }
    )
    report.not_mean = (
        "One API process (one uvicorn worker, one core at most) with its load generator, an httpx client "
        "whose own per-request CPU cost is of the same order as the server's, on the same cores as Postgres: "
        "the request rate is bounded by this machine's CPU, not by the API's design, and a deployment scales "
        "it with replicas. No TLS, no proxy, loopback network, one tenant with a noop job, an empty database "
        "growing during the run; idempotency keys, tracing export and admission control at quota are not "
        "exercised. " + shared_host(report, "Postgres and the API process")
    )
