"""A fabricated outcome of the fault harness that passes every check, and the builders of its parts:
what the checks' tests (test_report.py, test_dependency_checks.py) spoil one way at a time. No servers."""

from __future__ import annotations

import dataclasses

from tests.faults.dependencies import PARENT_FAULT_KINDS, Edge, Step
from tests.faults.graphs import DOOMED_JOB, STEP_JOB
from tests.faults.groups import GroupOutcome
from tests.faults.report import (
    FAULT_KINDS,
    HOSTILE_BEHAVIOURS,
    LIMITED_FAULT_KINDS,
    Door,
    Fault,
    Outcome,
    PoisonAnswer,
    Run,
)
from tests.receiver import Call

BOUNDS = {"quiet": 2.0, "hostile": 2.0, "faults": 20.0}


def call(run: str, epoch: int, attempt: int = 1, behaviour: str = "", abandoned: bool = False) -> Call:
    headers = {"scheduler-run-id": run, "scheduler-epoch": str(epoch), "scheduler-attempt": str(attempt)}
    return Call(headers, b"{}", behaviour=behaviour, abandoned=abandoned)


def limited_call(run: str, key: str, concurrent: int, epoch: int = 1) -> Call:
    return dataclasses.replace(call(run, epoch), key=key, concurrent=concurrent)


def callback(run: str, attempt: int = 1) -> Call:
    return Call({"scheduler-run-id": run, "scheduler-callback-attempt": str(attempt)}, b"{}")


def good() -> Outcome:
    victims = [Run(f"v{i}", "victim", "succeeded", 1, 25, 1, phase, 0.3) for i, phase in enumerate(BOUNDS)]
    hostile = [Run(f"h-{b}", "hostile", "failed", 2, 2, 2) for b in HOSTILE_BEHAVIOURS]
    calls = [call(r.id, 1) for r in victims] + [callback(r.id) for r in victims] + [callback("v0", 2)]
    calls += [
        call(f"h-{b}", e, e, behaviour=b, abandoned=b == "hang") for b in HOSTILE_BEHAVIOURS for e in (1, 2)
    ]
    # The limited job: limit 2; key a reached it, b did not.
    limited = [Run(f"l{i}", "limited", "succeeded", 1, 25, 1) for i in range(4)]
    calls += [limited_call("l0", "a", 1), limited_call("l1", "a", 2), limited_call("l2", "b", 1)]
    calls += [limited_call("l3", "a", 1)]
    steps, graph_calls = graph()
    calls += graph_calls
    return Outcome(
        accepted=[r.id for r in victims],
        runs=[*victims, *hostile, Run("poison", "hostile", "failed", 0, 2, 1), *limited],
        calls=calls,
        faults=[
            Fault(
                1.0,
                "",
                kind,
                "",
                in_flight=3,
                limited=2 if kind in LIMITED_FAULT_KINDS else None,
                parents=2 if kind in PARENT_FAULT_KINDS else None,
            )
            for kind in FAULT_KINDS
        ],
        lag_bounds=BOUNDS,
        poison_answers=[PoisonAnswer("deep run", 422, 0), PoisonAnswer("huge", 201, 1, refuse=False)],
        poison_run="poison",
        late_results_discarded=2,
        callbacks={r.id: "delivered" for r in victims},
        limit=2,
        door=Door(2.0, opened=300, cut=280, longest=2.6, probes=40, slowest_probe=0.05),
        groups=[GroupOutcome(f"g{i}", 10, 10, True, True, 1, True, "succeeded") for i in range(2)],
        groups_submitted=["g0", "g1"],
        graph_steps=steps,
        graph_accepted={s.id: tuple(e.parent for e in s.parents) for s in steps},
    )


def graph() -> tuple[list[Step], list[Call]]:
    """Two graphs as they should end: a chain ga -> gb -> gc that succeeded, each step starting after
    its parent ended; and gx, whose every attempt failed, with gy cancelled by it, gz through gy,
    and gw run anyway ('run'). Times: the database's clock from 1000 s, the receiver's from 10 s."""
    steps = [
        Step("ga", STEP_JOB, "succeeded", None, 1, 1000.0, 1000.5),
        Step("gb", STEP_JOB, "succeeded", None, 1, 1000.6, 1001.0, (Edge("ga"),)),
        Step("gc", STEP_JOB, "succeeded", None, 1, 1001.1, 1001.5, (Edge("gb"),)),
        Step("gx", DOOMED_JOB, "failed", None, 2, 1000.0, 1000.8),
        Step("gy", STEP_JOB, "cancelled", None, 0, None, 1000.8, (Edge("gx"),)),
        Step("gz", STEP_JOB, "cancelled", None, 0, None, 1000.8, (Edge("gy"),)),
        Step("gw", STEP_JOB, "succeeded", None, 1, 1000.9, 1001.2, (Edge("gx", "run"),)),
    ]
    calls = [
        timed(call("ga", 1), 10.0, 10.5),
        timed(call("gb", 1), 10.6, 11.0),
        timed(call("gc", 1), 11.1, 11.5),
        timed(call("gx", 1), 10.0, 10.2),
        timed(call("gx", 2, attempt=2), 10.4, 10.7),
        timed(call("gw", 1), 10.9, 11.2),
    ]
    return steps, calls


def timed(c: Call, started: float, ended: float) -> Call:
    return dataclasses.replace(c, started=started, ended=ended)
