"""Metrics that cannot hide a dead tier: engine-only gauges come from engines alone, worker-only
ones from workers alone (real processes), so an alert on them reads "absent", not 0, when that tier
is down."""

from __future__ import annotations

import re
from pathlib import Path

from app.config import Settings
from app.telemetry import metrics
from tests.processes import processes

ENGINE_ONLY = {g.describe()[0].name for g in metrics.ENGINE_ONLY}
WORKER_ONLY = {g.describe()[0].name for g in metrics.WORKER_ONLY}


def families(text: str) -> set[str]:
    return set(re.findall(r"^# TYPE (\S+) \S+$", text, flags=re.MULTILINE))


async def test_each_tier_exports_only_its_own_gauges(settings: Settings, tmp_path: Path) -> None:
    assert {"scheduler_oldest_due_pending_age_seconds", "scheduler_partitions"} <= ENGINE_ONLY
    assert "scheduler_worker_slots" in WORKER_ONLY
    async with processes(settings, tmp_path) as spawn:
        engine, worker = spawn("engine"), spawn("worker")
        api_alone, api_with_engine = spawn("api", SCHEDULER_ENGINE="off"), spawn("api", SCHEDULER_ENGINE="on")
        for process in (engine, worker, api_alone, api_with_engine):
            await process.wait_ready()
        exported = {p: families(await p.metrics()) for p in (engine, worker, api_alone, api_with_engine)}

    assert exported[engine] >= ENGINE_ONLY and not WORKER_ONLY & exported[engine]
    assert exported[worker] >= WORKER_ONLY and not ENGINE_ONLY & exported[worker]
    assert not (ENGINE_ONLY | WORKER_ONLY) & exported[api_alone]
    assert exported[api_with_engine] >= ENGINE_ONLY and not WORKER_ONLY & exported[api_with_engine]
    assert "scheduler_runs_claimed_total" in exported[worker]  # the common registry is still there
