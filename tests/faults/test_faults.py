"""The fault harness in its short mode (a few minutes on two cores): the victim alone, then beside the
hostile tenant, then under one cycle of the seven faults (the seventh kills a worker mid-delivery of
callbacks: every victim run's callback must still be delivered), with a concurrency-limited job's
backlog held behind its slots under those faults (the receiver must never see more than its limit of
a key in flight at once; issue 17). Through the fault window the victim submits small graphs of
dependent runs: none may start before its parents succeeded (or ended, for "run"), none be left
held, none be lost; and every group its batches made must fire exactly once. The long mode is by hand:
`python -m tests.faults.harness --runs 2000 --duration 120`. The checks themselves are proven able to
fail in test_report.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.dependencies import figures
from tests.faults.harness import Config, run


@pytest.mark.timeout(600)
@pytest.mark.bounded_under_load
async def test_victim_runs_all_succeed_in_bounded_lag_beside_a_hostile_tenant_under_faults(
    tmp_path: Path,
) -> None:
    report = await run(Config(), tmp_path)
    print(report.render())
    assert report.violations() == [], f"{report.render()}\nprocess logs: {tmp_path / 'logs'}"
    # The figures behind the verdict, spelled out.
    assert not (report.lost or report.stuck or report.same_epoch_duplicates or report.never_called)
    assert report.statuses["victim"] == {"succeeded": len(report.outcome.accepted)}
    assert not report.unlanded and report.outcome.late_results_discarded > 0
    assert not report.over_limit and max(report.limited_peaks.values()) == report.outcome.limit
    # Every limited run succeeded: the backlog, and the bursts a fault submitted to strike it.
    assert set(report.statuses["limited"]) == {"succeeded"}
    assert report.statuses["limited"]["succeeded"] >= Config().limited_runs
    # Every group fired exactly once; the graphs' releases, cancels and "run anyway" all happened.
    assert report.outcome.groups and all(g.made == 1 for g in report.outcome.groups)
    graphs = figures(report.outcome.graph_steps)
    assert graphs.released and graphs.cancelled_through and graphs.ran_after_failure
    assert len(report.outcome.graph_accepted) == graphs.steps
