"""The harness's checks can fail: each is fed a fabricated bad outcome (a run missing, an attempt over
max, a kill with nothing in flight, …) and must give a failing verdict naming it. No servers: this
tests the checking logic itself, against a good outcome that passes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from tests.faults.fabricated import call, good, limited_call
from tests.faults.report import Fault, Outcome, PoisonAnswer, Run, check, per_fault


def with_group(**changed: object) -> Callable[[Outcome], Outcome]:
    return lambda o: dataclasses.replace(
        o, groups=[dataclasses.replace(o.groups[0], **changed), *o.groups[1:]]
    )


def with_runs(o: Outcome, change: Callable[[Run], Run | None]) -> Outcome:
    runs = [changed for r in o.runs if (changed := change(r)) is not None]
    return dataclasses.replace(o, runs=runs)


def set_status(run: str, status: str) -> Callable[[Outcome], Outcome]:
    return lambda o: with_runs(o, lambda r: dataclasses.replace(r, status=status) if r.id == run else r)


def without_calls(run: str) -> Callable[[Outcome], Outcome]:
    """The outcome with the receiver having never seen `run`."""
    return lambda o: dataclasses.replace(
        o, calls=[c for c in o.calls if c.headers["scheduler-run-id"] != run]
    )


def test_a_good_outcome_passes() -> None:
    report = check(good())
    assert report.violations() == [], report.render()
    assert "verdict                 OK" in report.render()


BAD: dict[str, tuple[Callable[[Outcome], Outcome], str]] = {
    "a group whose runs all ended but never completed": (with_group(completed=False), "completed False"),
    "a group whose counters missed a run's end": (with_group(ended=9), "9 of 10 runs counted ended"),
    "a group that completed twice over": (with_group(made=2), "2 completion runs (must be 1)"),
    "a completed group never fired": (
        with_group(fired=False, made=0, named=False, status=None),
        "fired False",
    ),
    "a group's completion run that failed": (with_group(status="failed"), "status failed"),
    "a group the API answered for, missing from the database": (
        lambda o: dataclasses.replace(o, groups_submitted=[*o.groups_submitted, "g9"]),
        "1 groups the API answered for are not in the database (e.g. ['g9'])",
    ),
    "no group at all (the check saw nothing)": (
        lambda o: dataclasses.replace(o, groups=[], groups_submitted=[]),
        "the victim submitted no group",
    ),
    "an accepted run missing from the database": (
        lambda o: with_runs(o, lambda r: None if r.id == "v0" else r),
        "1 accepted runs lost",
    ),
    "a run in the database nobody was answered for": (
        lambda o: dataclasses.replace(o, accepted=o.accepted[1:]),
        "never answered for",
    ),
    "a success the receiver never saw under the final epoch": (
        lambda o: with_runs(o, lambda r: dataclasses.replace(r, epoch=2) if r.id == "v1" else r),
        "without a call under their final epoch",
    ),
    "a run stuck running": (
        set_status("v2", "running"),
        "1 runs not terminal",
    ),
    "the poison run never contained": (
        set_status("poison", "pending"),
        "poison run poison was never contained",
    ),
    "a victim run failed": (
        set_status("v0", "failed"),
        "victim runs not succeeded",
    ),
    "a victim run never called": (
        without_calls("v0"),
        "never reached the receiver",
    ),
    "an attempt over max in the database": (
        lambda o: with_runs(o, lambda r: dataclasses.replace(r, attempt=3) if r.id == "h-nul" else r),
        "attempt > max_attempts",
    ),
    "an attempt over max seen by the receiver": (
        lambda o: dataclasses.replace(o, calls=[*o.calls, call("h-hang", 3, attempt=3)]),
        "(receiver)",
    ),
    "one (run, epoch) called twice": (
        lambda o: dataclasses.replace(o, calls=[*o.calls, call("v0", 1)]),
        "calls repeated a (run, epoch)",
    ),
    "a victim run over the hostile phase's lag bound": (
        lambda o: with_runs(o, lambda r: dataclasses.replace(r, lag=2.5) if r.phase == "hostile" else r),
        "due-lag bound",
    ),
    "a kill with nothing in flight": (
        lambda o: dataclasses.replace(
            o,
            faults=[
                dataclasses.replace(f, in_flight=0) if f.kind == "kill -9 engine" else f for f in o.faults
            ],
        ),
        "never landed with work in flight: ['kill -9 engine']",
    ),
    "a fault missing": (
        lambda o: dataclasses.replace(o, faults=[f for f in o.faults if f.kind != "crash postgres"]),
        "['crash postgres']",
    ),
    "only a note, no fault": (
        lambda o: dataclasses.replace(o, faults=[Fault(0, "", "kill -9 api", "restarted")]),
        "never landed",
    ),
    "the NATS store lost at the crash": (
        lambda o: dataclasses.replace(
            o,
            faults=[*o.faults, Fault(2, "", "kill -9 nats", "", 5, problem="stream gone after the restart")],
        ),
        "stream gone",
    ),
    "the frozen worker's late results not discarded": (
        lambda o: dataclasses.replace(o, late_results_discarded=0),
        "late results were not seen discarded",
    ),
    "a poison payload answered 500 and written": (
        lambda o: dataclasses.replace(o, poison_answers=[PoisonAnswer("deep run", 500, 1)]),
        "poison 'deep run' answered 500",
    ),
    "a poison payload refused with 4xx but written": (
        lambda o: dataclasses.replace(o, poison_answers=[PoisonAnswer("batch 253 deep", 422, 1)]),
        "wrote 1 rows",
    ),
    "valid hostile input refused": (
        lambda o: dataclasses.replace(o, poison_answers=[PoisonAnswer("huge", 500, 0, refuse=False)]),
        "valid hostile input 'huge' answered 500",
    ),
    "no hanging endpoint ever called": (
        lambda o: dataclasses.replace(o, calls=[c for c in o.calls if c.behaviour != "hang"]),
        "never answered: ['hang']",
    ),
    "a hang never abandoned (no timeout hit)": (
        lambda o: dataclasses.replace(o, calls=[dataclasses.replace(c, abandoned=False) for c in o.calls]),
        "timeouts never hit",
    ),
    "a victim request no API ever accepted": (
        lambda o: dataclasses.replace(o, problems=["victim run victim-7 never accepted: no API answered it"]),
        "harness request failed: victim run victim-7 never accepted",
    ),
    "a poison request that dropped the connection": (
        lambda o: dataclasses.replace(o, poison_answers=[PoisonAnswer("payload NaN", 0, 0)]),
        "poison 'payload NaN' answered 0",
    ),
    "a terminal victim run whose callback was never delivered": (
        lambda o: dataclasses.replace(o, callbacks={**o.callbacks, "v1": "pending"}),
        "1 terminal victim runs' callbacks not delivered",
    ),
    "a terminal victim run with no callback obligation at all": (
        lambda o: dataclasses.replace(o, callbacks={k: v for k, v in o.callbacks.items() if k != "v2"}),
        "callbacks not delivered (e.g. v2)",
    ),
    "a delivered callback the receiver never saw": (
        lambda o: dataclasses.replace(
            o, calls=[c for c in o.calls if not (c.is_callback and c.headers["scheduler-run-id"] == "v1")]
        ),
        "callbacks never reached the receiver (e.g. v1)",
    ),
    "the kill of a delivering worker with no callback in flight": (
        lambda o: dataclasses.replace(
            o,
            faults=[
                dataclasses.replace(f, in_flight=0) if f.kind == "kill -9 worker delivering callbacks" else f
                for f in o.faults
            ],
        ),
        "never landed with work in flight: ['kill -9 worker delivering callbacks']",
    ),
    "a key with more attempts in flight at the receiver than its limit": (
        lambda o: dataclasses.replace(o, calls=[*o.calls, limited_call("l3", "b", 3, epoch=2)]),
        "1 attempts arrived at the receiver with more than 2 of their key in flight (e.g. l3 epoch 2 key 'b'",
    ),
    "a limit never under pressure": (
        lambda o: dataclasses.replace(
            o, calls=[dataclasses.replace(c, concurrent=min(c.concurrent, 1)) for c in o.calls]
        ),
        "ever had 2 requests in flight at once",
    ),
    "a limited run failed": (
        set_status("l2", "failed"),
        "limited runs not succeeded despite a generous max_attempts: {'failed': 1}",
    ),
    "a limited run stuck held": (
        set_status("l1", "pending"),
        "1 runs not terminal",
    ),
    "a limited run never called": (
        without_calls("l3"),
        "1 limited runs never reached the receiver",
    ),
    "a limited run called twice in one epoch": (
        lambda o: dataclasses.replace(o, calls=[*o.calls, limited_call("l0", "a", 1)]),
        "calls repeated a (run, epoch)",
    ),
    "a worker kill with no limited request open at the receiver": (
        lambda o: dataclasses.replace(
            o,
            faults=[dataclasses.replace(f, limited=0) if f.kind == "kill -9 worker" else f for f in o.faults],
        ),
        "never struck the limited job's runs holding a slot: ['kill -9 worker']",
    ),
    "an orphaned request counted past the lease": (
        lambda o: dataclasses.replace(
            o,
            faults=[
                *o.faults,
                Fault(
                    2, "", "kill -9 worker", "", 3, problem="an orphaned request stayed counted", limited=1
                ),
            ],
        ),
        "kill -9 worker: an orphaned request stayed counted",
    ),
    "a slow connection the server never cut": (
        lambda o: dataclasses.replace(o, door=dataclasses.replace(o.door, longest=9.5)),
        "a slow connection stayed open 9.5s",
    ),
    "no slow connection cut at all": (
        lambda o: dataclasses.replace(o, door=dataclasses.replace(o.door, cut=0)),
        "no slow connection was cut by the server",
    ),
    "/healthz failing beside slow connections": (
        lambda o: dataclasses.replace(o, door=dataclasses.replace(o.door, probe_failures=3)),
        "/healthz failed 3 of 40 probes",
    ),
    "reading a run that answered 254 deep is a 500": (
        lambda o: dataclasses.replace(
            o,
            poison_answers=[
                *o.poison_answers,
                PoisonAnswer("GET a run answered 254 deep, 200", 500, 0, False),
            ],
        ),
        "valid hostile input 'GET a run answered 254 deep, 200' answered 500",
    ),
    "a run retried under its job's pause reached the receiver": (
        lambda o: dataclasses.replace(
            o,
            paused_runs=["p0", "p1"],
            runs=[*o.runs, Run("p0", "hostile", "cancelled", 1, 2, 2)],
            calls=[*o.calls, call("p0", 2)],
        ),
        "1 runs retried under their job's pause reached the receiver",
    ),
    "a submission answered 500 while a part was down": (
        lambda o: dataclasses.replace(o, answered=[(1.0, 201), (2.0, 503), (2.5, 500), (3.0, 201)]),
        "a 5xx other than 503",
    ),
    "an engine died on its own": (
        lambda o: dataclasses.replace(o, died=["engine on :1234 exited 1"]),
        "processes exited on their own",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_outcome_fails_the_verdict(case: str) -> None:
    make_bad, expected = BAD[case]
    report = check(make_bad(good()))
    violations = report.violations()
    assert any(expected in v for v in violations), (case, violations)
    assert "verdict                 FAILED" in report.render()


def test_lag_percentiles_come_from_the_database_lags() -> None:
    o = good()
    lags = [0.1 * i for i in range(1, 101)]
    o.runs += [Run(f"q{i}", "victim", "succeeded", 1, 25, 1, "quiet", lag) for i, lag in enumerate(lags)]
    o.accepted += [f"q{i}" for i in range(100)]
    o.calls += [call(f"q{i}", 1) for i in range(100)]
    report = check(o)
    assert report.percentile("quiet", 0.5) == pytest.approx(5.0, abs=0.11)
    assert report.percentile("quiet", 0.99) == pytest.approx(9.9, abs=0.11)
    assert any("due-lag bound" in v for v in report.violations())  # 2 s bound: most of them are over


def test_a_dead_engines_claims_never_called_under_their_epoch_are_counted_as_undelivered() -> None:
    o = good()
    held = (("v0", 1), ("v1", 7))  # v0 was called under epoch 1; v1 never under epoch 7
    o.faults = [*o.faults, Fault(3.0, "", "kill -9 engine", "", in_flight=2, held=held)]
    report = check(o)
    assert report.claims_never_delivered == 1
    assert "2 held at the kill, 1 never delivered" in report.render()


def test_per_fault_figures_are_taken_over_each_faults_slot() -> None:
    kill, crash = Fault(10.0, "", "kill -9 api", "", 3), Fault(20.0, "", "crash postgres", "", 5)
    runs = [
        Run("a", "victim", "succeeded", 1, 25, 1, "faults", 0.5, due=11.0, started=11.5),
        Run("b", "victim", "succeeded", 1, 25, 1, "faults", 4.0, due=19.0, started=23.0),
        Run("c", "victim", "succeeded", 1, 25, 1, "faults", 0.2, due=21.0, started=21.2),
    ]
    o = dataclasses.replace(
        good(),
        faults=[crash, kill, Fault(25.0, "", "start api", "")],  # out of order; a note is no fault
        runs=runs,
        answered=[(9.0, 201), (10.5, 503), (12.0, 201), (20.5, 500), (22.0, 201)],
    )
    figures = {f.fault.kind: f for f in per_fault(o)}
    assert set(figures) == {"kill -9 api", "crash postgres"}
    assert (figures["kill -9 api"].first_submission, figures["kill -9 api"].first_start) == (2.0, 1.5)
    assert figures["kill -9 api"].p99_lag == 4.0 and figures["kill -9 api"].other_5xx == 0
    assert figures["crash postgres"].first_submission == 2.0
    assert figures["crash postgres"].first_start == pytest.approx(1.2)
    assert figures["crash postgres"].p99_lag == 0.2 and figures["crash postgres"].other_5xx == 1
