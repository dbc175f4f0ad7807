"""The load driver's short variant: 50 rps for 5 s over real HTTP, then the quota flood. It asserts
zero errors, no lost run and the 429 isolation; no timing (the figures are printed, not judged).
The long run is by hand: `python -m tests.faults.load --rps 300 --seconds 60`."""

from __future__ import annotations

from pathlib import Path

from app.config import Settings
from tests.faults.load import run


async def test_sustained_load_loses_nothing_and_the_quota_isolates_tenants(
    settings: Settings, tmp_path: Path
) -> None:
    report = await run(settings, tmp_path, rps=50, seconds=5, quota=300)
    print(report.render())
    assert report.violations() == [], f"{report.render()}\nprocess logs: {tmp_path}"
    assert report.sent == report.accepted == 250 and not report.errors and report.lost == 0
    assert report.statuses == {"succeeded": 250}
    assert report.flood_refusals and all(
        status == 429 and retry for status, retry, _ in report.flood_refusals
    )
    assert report.flood_pending == report.flood_accepted <= 300
    assert report.steady_during_flood["201"] > 0 and set(report.steady_during_flood) == {"201"}
