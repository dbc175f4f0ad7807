"""The failover scenario's own checks (tests/faults/failover.py Figures.violations) fail on what they
must catch: fabricated figures, no servers."""

from __future__ import annotations

import dataclasses
from collections import Counter

from tests.faults.failover import Figures
from tests.faults.report import Outcome, Run, check
from tests.receiver import Call


def call(run: str, epoch: int) -> Call:
    return Call(
        headers={"scheduler-run-id": run, "scheduler-epoch": str(epoch), "scheduler-attempt": "1"}, body=b""
    )


def figures(**changes: object) -> Figures:
    outcome = Outcome(
        accepted=["a", "b"],
        runs=[Run("a", "victim", "succeeded", 1, 25, 1), Run("b", "victim", "succeeded", 1, 25, 1)],
        calls=[call("a", 1), call("b", 1)],
        faults=[],
        lag_bounds={},
    )
    good = Figures(
        fault="kill",
        detail="kill -9 of pg0",
        sync_standby="pg1",
        promoted="pg1",
        submissions_in_flight=8,
        runs_in_flight=40,
        calls_in_flight=5,
        first_submission=21.0,
        first_start=21.2,
        write_outage=21.0,
        start_outage=21.2,
        answers=Counter({"201": 2, "503": 90}),
        retried_keys=8,
        refused=[],
        report=check(outcome),
    )
    return dataclasses.replace(good, **changes)  # type: ignore[arg-type]


def test_good_figures_pass() -> None:
    assert figures().violations() == []


def test_each_broken_promise_is_caught() -> None:
    lost = Outcome(
        accepted=["a", "b"],
        runs=[Run("a", "victim", "succeeded", 1, 25, 1)],
        calls=[call("a", 1)],
        faults=[],
        lag_bounds={},
    )
    twice = Outcome(
        accepted=["a"],
        runs=[Run("a", "victim", "succeeded", 1, 25, 1), Run("x", "victim", "succeeded", 1, 25, 1)],
        calls=[call("a", 1), call("a", 1), call("x", 1)],
        faults=[],
        lag_bounds={},
    )
    cases = {
        "a 500": figures(answers=Counter({"201": 2, "503": 3, "500": 1})),
        "a 409": figures(answers=Counter({"201": 2, "409": 1})),
        "an accepted run lost": figures(report=check(lost)),
        "a second run for a key, a (run, epoch) called twice": figures(report=check(twice)),
        "not the synchronous standby promoted": figures(promoted="pg2"),
        "never recovered": figures(first_submission=None),
        "no run started after": figures(first_start=None),
        "nothing in flight": figures(submissions_in_flight=0),
        "no run in flight": figures(runs_in_flight=0, calls_in_flight=0),
    }
    for name, broken in cases.items():
        assert broken.violations(), name
    assert len(figures(report=check(twice)).violations()) == 2
