"""Runs a worker holds back (app/worker/held.py): per tenant, urgent-lane runs start first."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from app.bus.message import RunMessage
from app.worker.delivery import Delivery
from app.worker.held import HeldRuns


def held(tenant: str, *, urgent: bool = False) -> Delivery:
    run = RunMessage(uuid.uuid4(), datetime.now(UTC), tenant, "j", 1, 1, {}, {"type": "python"}, 30)
    return Delivery(None, run, urgent=urgent)  # type: ignore[arg-type]  # no message is acked here


def test_a_tenants_urgent_run_starts_before_its_older_runs() -> None:
    runs = HeldRuns()
    older = [held("a") for _ in range(3)]
    for d in older:
        runs.add(d)
    urgent = held("a", urgent=True)
    runs.add(urgent)
    assert [runs.next_to_start("a") for _ in range(4)] == [urgent, *older]
    assert len(runs) == 0 and runs.tenants() == []


def test_handing_back_takes_the_heaviest_tenants_newest_run_and_its_urgent_runs_last() -> None:
    runs = HeldRuns()
    urgent = held("a", urgent=True)
    normal = [held("a"), held("a")]
    for d in [urgent, *normal, held("b")]:
        runs.add(d)
    load = {"a": 0, "b": 5}  # b runs more on this worker: it is the heaviest with 6
    assert runs.newest_of_heaviest(load.__getitem__).tenant == "b"
    assert runs.newest_of_heaviest(load.__getitem__) is normal[1]
    assert runs.newest_of_heaviest(load.__getitem__) is normal[0]
    assert runs.newest_of_heaviest(load.__getitem__) is urgent
    assert len(runs) == 0


def test_a_removed_run_is_gone_from_its_lane() -> None:
    runs = HeldRuns()
    urgent, normal = held("a", urgent=True), held("a")
    runs.add(urgent)
    runs.add(normal)
    runs.remove(urgent)
    assert urgent not in runs and runs.get(urgent.run.run_id) is None
    assert runs.next_to_start("a") is normal
    assert runs.tenants() == []
