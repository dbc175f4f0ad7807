"""The dependencies' checks (tests/faults/dependencies.py) can fail: the fabricated good outcome's
graphs (tests/faults/fabricated.py) are spoiled one way at a time — a step started or called before
its parent ended, one run though its parent failed, one left held, a run or an edge lost, nothing
under pressure — and each must fail the verdict naming it. No servers."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from tests.faults.dependencies import Figures, Step, figures
from tests.faults.fabricated import call, good, timed
from tests.faults.report import Outcome, check
from tests.faults.stack import deadlocks

# Two processes' entries in a Postgres log: a deadlock in the settle trigger, explained over three
# entries (one of them on two lines), then another process's error.
LOG = """2026-12-04 14:00:01.100 UTC [70] LOG:  checkpoint starting: time
2026-12-04 14:00:01.123 UTC [71] ERROR:  deadlock detected
2026-12-04 14:00:01.123 UTC [71] DETAIL:  Process 71 waits for ShareLock on transaction 900; blocked by process 72.
	Process 72 waits for ShareLock on transaction 901; blocked by process 71.
2026-12-04 14:00:01.123 UTC [71] CONTEXT:  while updating tuple (0,5) in relation "job_runs_default"
	PL/pgSQL function scheduler_settle_dependents() line 40 at SQL statement
2026-12-04 14:00:01.123 UTC [71] STATEMENT:  UPDATE job_runs r SET status = ...
2026-12-04 14:00:02.000 UTC [73] ERROR:  relation "nope" does not exist
"""


def with_step(run: str, **changed: object) -> Callable[[Outcome], Outcome]:
    return lambda o: dataclasses.replace(
        o, graph_steps=[dataclasses.replace(s, **changed) if s.id == run else s for s in o.graph_steps]
    )


def without_step(run: str) -> Callable[[Outcome], Outcome]:
    """The step gone from the database (the API's acceptance of it kept)."""
    return lambda o: dataclasses.replace(o, graph_steps=[s for s in o.graph_steps if s.id != run])


def never_submitted(*runs: str) -> Callable[[Outcome], Outcome]:
    """The steps gone altogether: neither submitted nor in the database, nor called."""
    return lambda o: dataclasses.replace(
        o,
        graph_steps=[s for s in o.graph_steps if s.id not in runs],
        graph_accepted={i: p for i, p in o.graph_accepted.items() if i not in runs},
        calls=[c for c in o.calls if c.headers.get("scheduler-run-id") not in runs],
    )


def with_call_at(run: str, started: float) -> Callable[[Outcome], Outcome]:
    return lambda o: dataclasses.replace(
        o,
        calls=[
            timed(c, started, started + 0.4) if c.headers.get("scheduler-run-id") == run else c
            for c in o.calls
        ],
    )


def test_the_good_graphs_pass_and_their_figures_count_each_case() -> None:
    report = check(good())
    assert report.violations() == [], report.render()
    # 2 graphs' roots of 7 runs; gb, gc released; gy cancelled by gx, gz through gy; gw ran anyway.
    assert figures(report.outcome.graph_steps) == Figures(2, 7, 2, 1, 1, 1, pytest.approx(0.1))
    assert "victim graphs           7 runs (2 without parents)" in report.render()


def test_a_deadlock_is_read_from_the_log_with_what_explains_it() -> None:
    [found] = deadlocks(LOG)
    assert found.startswith("2026-12-04 14:00:01.123 UTC [71] ERROR:  deadlock detected")
    assert "blocked by process 72. Process 72 waits" in found
    assert "scheduler_settle_dependents() line 40" in found and "STATEMENT:  UPDATE job_runs" in found
    assert "checkpoint" not in found and "nope" not in found


def test_a_deadlock_elsewhere_is_counted_but_is_not_the_dependencies_fault() -> None:
    other = deadlocks(LOG)[0].replace("scheduler_settle_dependents", "scheduler_create_day_partition")
    report = check(dataclasses.replace(good(), deadlocks=[other]))
    assert report.violations() == []
    assert "postgres deadlocks      1 (e.g." in report.render()


def test_a_deadlock_with_a_submission_locking_its_parents_is_retried_not_a_fault() -> None:
    # The end of a parent against a submission naming that parent and its child: no lock order rules
    # it out, and the submission is tried again (app/services/submission.py).
    statement = "Process 72: UPDATE job_runs p SET dependents = COALESCE(p.dependents, 0) + k.n"
    submission = deadlocks(LOG)[0].replace("Process 72 waits", f"{statement} Process 72 waits")
    assert "dependents = COALESCE" in submission
    assert check(dataclasses.replace(good(), deadlocks=[submission])).violations() == []
    # Without the submission in it, the same deadlock is two ends disagreeing: a fault.
    assert check(dataclasses.replace(good(), deadlocks=deadlocks(LOG))).violations() != []


BAD: dict[str, tuple[Callable[[Outcome], Outcome], str]] = {
    "a dependent started before its parent ended (database)": (
        with_step("gb", first_start=1000.4),
        "1 graph steps started before a parent ended (e.g. gb started before its parent ga ended (database))",
    ),
    "a dependent started while its parent had not ended": (
        with_step("ga", status="running", finished=None),
        "gb started before its parent ga ended (database)",
    ),
    "a dependent called before its parent's call ended (receiver)": (
        with_call_at("gc", 10.9),
        "gc called before its parent gb's last call ended (receiver)",
    ),
    "a dependent started though its 'cancel' parent failed": (
        with_step("gy", status="succeeded", first_start=1000.9, finished=1001.0, epoch=1),
        "1 graph steps started though a 'cancel' parent did not succeed (e.g. gy started though its parent "
        "gx ended failed)",
    ),
    "a dependent of a failed parent left pending": (
        with_step("gy", status="pending", held="dependencies", finished=None),
        "graph steps whose 'cancel' parent did not succeed were not cancelled unstarted (e.g. gy pending",
    ),
    "a dependent of a failed parent cancelled, but only after it was called": (
        lambda o: dataclasses.replace(o, calls=[*o.calls, timed(call("gy", 1), 11.0, 11.2)]),
        "were not cancelled unstarted (e.g. gy cancelled",
    ),
    "a dependent held forever": (
        with_step("gc", status="pending", held="dependencies", first_start=None, finished=None),
        "1 graph steps held 'dependencies' though their parents have all ended (e.g. gc)",
    ),
    "a dependent released but never run": (
        with_step("gc", status="cancelled", first_start=None),
        "1 graph steps their parents all settled did not succeed (e.g. gc cancelled)",
    ),
    "a graph run not terminal": (
        with_step("gw", status="running", finished=None),
        "1 graph steps not terminal after the drain (e.g. gw running held None)",
    ),
    "an accepted graph run lost": (
        without_step("gc"),
        "1 accepted graph runs lost (e.g. gc)",
    ),
    "a graph run the API never answered for (a batch sent again made a second one)": (
        lambda o: dataclasses.replace(
            o, graph_steps=[*o.graph_steps, Step("ga2", "step", "succeeded", None, 1, 1000.0, 1000.5)]
        ),
        "1 graph runs the API never answered for (e.g. ga2)",
    ),
    "an edge lost": (
        with_step("gc", parents=()),
        "1 graph runs whose edges differ from their submission (e.g. gc: submitted ['gb'], recorded [])",
    ),
    "no step cancelled through a cancelled parent": (
        never_submitted("gz"),
        "no graph step cancelled through a cancelled parent",
    ),
    "no graph at all": (
        never_submitted("ga", "gb", "gc", "gx", "gy", "gz", "gw"),
        "no graph step started after its parents succeeded / cancelled by a failed parent",
    ),
    "a deadlock between two parents' ends": (
        lambda o: dataclasses.replace(o, deadlocks=deadlocks(LOG)),
        "1 deadlocks in a dependency's statements (e.g. 2026-12-04 14:00:01.123 UTC [71] ERROR:  deadlock",
    ),
    "a Postgres crash with no graph parent in flight": (
        lambda o: dataclasses.replace(
            o,
            faults=[dataclasses.replace(f, parents=0) if f.kind == "crash postgres" else f for f in o.faults],
        ),
        "faults that never struck with graph parents in flight: ['crash postgres']",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_graph_fails_the_verdict(case: str) -> None:
    make_bad, expected = BAD[case]
    report = check(make_bad(good()))
    violations = report.violations()
    assert any(expected in v for v in violations), (case, violations)
    assert "verdict                 FAILED" in report.render()
