"""What every scenario does first: collect and print the environment, size the workload."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.dev import free_port
from app.telemetry.ops_server import HostedServer
from bench.env import describe
from bench.measure import Metrics
from bench.report import Report
from bench.stack import ADMIN_TOKEN, Bench

# The caveats every figure on this machine shares; each scenario adds its own.
SHARED_HOST = (
    "They were measured on one machine ({cpus} cores, load average {load} at start; nothing else on it "
    "was controlled, so noisy neighbours count) where the bench process and {services} compete for the same "
    "cores and talk over loopback, with no Postgres or fsync tuning. A floor for this setup, not a "
    "production ceiling, and not comparable with a figure from another machine or another day."
)


def sized(value: int | None, *, full: int, smoke: int, is_smoke: bool) -> int:
    """An explicit size wins; otherwise the scenario's default, or its tiny smoke size."""
    if value is not None:
        return value
    return smoke if is_smoke else full


async def begin(bench: Bench, scenario: str, *, redis: bool = False) -> Report:
    env = await bench.environment(redis=redis)
    print(f"== {scenario}{' (smoke)' if bench.smoke else ''}: environment", flush=True)
    for line in describe(env):
        print(f"  {line}", flush=True)
    sys.stdout.flush()
    return Report(scenario, bench.smoke, env)


def shared_host(report: Report, services: str) -> str:
    env = report.env
    load = env["load_average_at_start"][0]
    return SHARED_HOST.format(cpus=env["cpu_count"], load=load, services=services)


def engine_summary(m: Metrics) -> dict[str, float]:
    """What an engine's /metrics says happened between two scrapes."""
    claim = "scheduler_claim_duration_seconds"
    return {
        "claims": m.value(f"{claim}_count"),
        "claims_scan": m.value(f"{claim}_count", path="scan"),
        "claims_hot": m.value(f"{claim}_count", path="hot"),
        "claim_seconds": m.value(f"{claim}_sum"),
        "claim_p50_ms": m.quantile(claim, 0.5) * 1000,
        "claim_p95_ms": m.quantile(claim, 0.95) * 1000,
        "publish_ack_wait_seconds": m.value("scheduler_publish_duration_seconds_sum"),
        "runs_claimed": m.value("scheduler_runs_claimed_total"),
        "runs_published": m.value("scheduler_runs_published_total"),
        "publish_failures": m.value("scheduler_publish_failures_total"),
        "hot_hits": m.value("scheduler_hot_index_events_total", event="hit"),
        "hot_empty": m.value("scheduler_hot_index_events_total", event="empty"),
        "hot_fallback": m.value("scheduler_hot_index_events_total", event="fallback"),
        "hot_stale": m.value("scheduler_hot_index_events_total", event="stale"),
    }


def worker_summary(m: Metrics) -> dict[str, float]:
    return {
        "executions": m.value("scheduler_execution_duration_seconds_count"),
        "execution_seconds": m.value("scheduler_execution_duration_seconds_sum"),
        "succeeded": m.value("scheduler_run_outcomes_total", status="succeeded"),
        "stale_dropped": m.value("scheduler_stale_results_total"),
        "fetches": m.value("scheduler_worker_fetch_size_count"),
        "fetched": m.value("scheduler_worker_fetch_size_sum"),
    }


def add_backlog_arguments(p: argparse.ArgumentParser) -> None:
    """The options every scenario that drains a standing backlog takes."""
    p.add_argument("--tenants", type=int, default=50)
    p.add_argument(
        "--no-analyze",
        dest="analyze",
        action="store_false",
        help="leave the backlog's partition without fresh statistics (as a new day's partition is)",
    )
    p.add_argument("--timeout", type=float, default=600.0)


async def api_tenant(
    client: httpx.AsyncClient, tenant: str, target: dict[str, str] | None = None
) -> dict[str, str]:
    """Create `tenant` and its job `noop` (a noop target unless `target`) through the API; returns the
    tenant's auth header."""
    r = await client.post("/tenants", json={"id": tenant}, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    r.raise_for_status()
    auth = {"Authorization": f"Bearer {r.json()['api_key']}"}
    r = await client.put(
        f"/tenants/{tenant}/jobs/noop", json={"target": target or {"type": "noop"}}, headers=auth
    )
    r.raise_for_status()
    return auth


@contextlib.asynccontextmanager
async def loopback_hook(handler: Callable[[Request], Awaitable[Response]]) -> AsyncIterator[str]:
    """`handler` served in this process at POST /hook on a free loopback port; yields the URL."""
    port = free_port()
    app = Starlette(routes=[Route("/hook", handler, methods=["POST"])])
    server = HostedServer(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/hook"
    finally:
        server.should_exit = True
        await task


def add_shape_argument(p: argparse.ArgumentParser) -> None:
    from bench.workload import SHAPES

    p.add_argument(
        "--shape",
        default="interleaved",
        help="the backlog's shape, or several comma-separated, or `all`: interleaved (round-robin over "
        "tenants, one due instant), contiguous (each tenant's burst in one block), distinct (one due "
        "instant per run), api (submitted with POST /tenants/{t}/runs/batch x1000 with a traceparent, "
        f"each tenant's burst contiguous, through a `scheduler api` process). One of {', '.join(SHAPES)}",
    )


def shapes(value: str) -> list[str]:
    """The shapes `--shape` names, in order; exits naming an unknown one."""
    from bench.workload import SHAPES

    chosen = list(SHAPES) if value == "all" else [s for s in value.split(",") if s]
    unknown = [s for s in chosen if s not in SHAPES]
    if unknown or not chosen:
        raise SystemExit(
            f"--shape: unknown {', '.join(unknown) or value!r}; choose from {', '.join(SHAPES)}, all"
        )
    return chosen
