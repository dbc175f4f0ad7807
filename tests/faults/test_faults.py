"""The fault harness in its short mode: every fault once while 400 runs drain (about a minute).
The long mode is by hand: `python -m tests.faults.harness --runs 2000 --duration 120`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.harness import Config, run
from tests.faults.report import FAULT_KINDS


@pytest.mark.timeout(420)
async def test_no_run_lost_or_started_twice_in_an_epoch_under_faults(tmp_path: Path) -> None:
    report = await run(Config(runs=400, duration=40), tmp_path)
    print(report.render())
    assert report.violations() == [], f"{report.render()}\nprocess logs: {tmp_path / 'logs'}"
    # The figures behind the verdict, spelled out.
    assert report.lost == report.stuck == report.same_epoch_duplicates == report.never_called == 0
    assert report.statuses == {"succeeded": 400}
    assert {f.kind for f in report.faults} >= set(FAULT_KINDS)
    assert report.late_results_discarded > 0  # the frozen worker's results were fenced out
