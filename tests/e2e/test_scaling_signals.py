"""The autoscaling queries of k8s/, evaluated by a real Prometheus scraping real api, engine and
worker processes while workers bind (a slow webhook): the workers' signal rises, the engines' stays
quiet, and both are back at 0 within a scrape and a gauge refresh of the backlog emptying. Every
alert rule evaluates without error. Skips only where no `prometheus` binary is installed (Debian:
`apt-get install prometheus`)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench import prometheus
from bench.scenarios import slow_target
from bench.stack import Bench
from tests.support import Services

pytestmark = pytest.mark.skipif(prometheus.binary() is None, reason="no prometheus binary installed")

WORKERS = "scale worker: worker-backlog"
ENGINES = "scale engine: due-backlog-age"


async def test_the_tier_that_binds_is_the_one_its_signal_scales(services: Services, tmp_path: Path) -> None:
    bench_services = Services(
        services.postgres_url,
        services.nats_url,
        services.redis_url,
        origins={"postgres": "test", "nats": "test", "redis": "test"},
        root=tmp_path,
    )
    # Small claim batches, so backpressure holds most of the backlog in Postgres (the engine pauses).
    bench = Bench(bench_services, smoke=True, out=tmp_path / "results", batch_size=10)
    parser = argparse.ArgumentParser()
    slow_target.add_arguments(parser)  # the scenario's own options, their defaults included
    args = parser.parse_args(
        [
            "--runs",
            "150",
            "--delay",
            "0.3",
            "--engines",
            "1",
            "--workers",
            "1",
            "--concurrency",
            "8",
            "--lease",
            "4",
            "--tenants",
            "3",
            "--timeout",
            "180",
        ]
    )
    try:
        report = await slow_target.run(bench, args)
    finally:
        await bench.close()
    samples = report.data["samples"]
    assert not [e for s in samples for e in s.get("errors", [])], "Prometheus refused a query"
    last = samples[-1]
    assert last["succeeded"] == 150
    assert last["claims"] / 150 <= 1.02 and last["reaped_dispatched"] == 0 and last["stale_starts"] == 0
    assert {q.name for q in prometheus.manifest_queries()} <= set(last["signals"])

    done = next(s["t"] for s in samples if s["succeeded"] >= 150)
    during = [s for s in samples if s["t"] < done]
    # Workers bind: their signal rises past what their slots hold (8), towards the whole backlog...
    assert max(s["signals"][WORKERS] or 0 for s in during) > 3 * 8
    assert any(s["due_pending"] > 0 for s in during), "backpressure held runs in Postgres"
    # ...while the engines' stays under its threshold, although runs wait pending meanwhile.
    assert max(s["signals"][ENGINES] or 0 for s in during) < 5
    # Both fall once the backlog is gone: within a scrape (1 s) and a gauge refresh (reaper, 2 s).
    settled = [s for s in samples if s["t"] >= done + 1.0 + 2.0 + 1.0]
    assert settled and all(not s["signals"][WORKERS] and not s["signals"][ENGINES] for s in settled)
