"""Dependencies under faults, the checks over what became of the victim's graphs (tests/faults/graphs.py).
Whatever the harness kills, crashes or freezes:

- parents first: no step starts before each of its parents ended, and succeeded when the edge is
  'cancel' — in the database (its first attempt's start against each parent's finished_at, both
  the database's clock) and at the receiver (its first call's arrival against the end of the
  parent's call under the parent's final epoch, both the receiver's clock); a step with a 'cancel'
  parent that did not succeed never starts (no attempt, no call) and ends cancelled;
- none held forever: nothing is left pending, held 'dependencies' once its parents have all ended,
  or not ended at all; a step of STEP_JOB its parents all settled (each 'cancel' one succeeded,
  each 'run' one ended) ran and succeeded;
- kept: every step the API accepted is in the database with the edges it was submitted with, and
  no graph run is there that the API did not answer for (a batch sent again made no second graph);
- under pressure: some step was released by its parents' success, some cancelled by a failed
  parent and some through a cancelled one, some ran after a parent failed; and the kills of an
  engine and a worker and the Postgres crash each struck with parents in flight (`Fault.parents`).
  Else the checks above saw nothing and prove nothing;
- no deadlock: no deadlock the Postgres log records went through a dependency's statements (a
  parent's end counting its dependents down) but one with a submission locking its parents. That
  one no lock order rules out (a submission may name a parent and its child, whose id is lower, and
  the parent's end locks the child after the parent), so the submission is tried again; any other
  is retried too and loses nothing, but it is a lock order two ends disagree on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tests.faults.graphs import JOBS, STEP_JOB

if TYPE_CHECKING:
    from tests.faults.report import Report
    from tests.receiver import Call

TERMINAL = ("succeeded", "failed", "cancelled", "expired")
# What names a dependency's statement in a deadlock's CONTEXT or STATEMENT: the settle trigger, and
# the submission's lock_parents and edges.
DEPENDENCY_STATEMENTS = ("scheduler_settle_dependents", "run_dependencies", "dependents = COALESCE")
SUBMISSION_LOCKING_PARENTS = "dependents = COALESCE"  # lock_parents: its deadlocks are retried
PARENT_FAULT_KINDS = ("kill -9 engine", "kill -9 worker", "crash postgres")


@dataclass(frozen=True)
class Edge:
    parent: str
    on_parent_failure: str = "cancel"


@dataclass(frozen=True)
class Step:
    """One run of a graph as the database has it at the end; times in seconds on its clock."""

    id: str
    job: str
    status: str
    held: str | None
    epoch: int
    first_start: float | None  # its first attempt's start; None: never started
    finished: float | None
    parents: tuple[Edge, ...] = ()


GATHER = """
SELECT r.id::text AS id, r.job, r.status, r.held, r.epoch,
       extract(epoch FROM LEAST(r.started_at, (SELECT min((a ->> 'started_at')::timestamptz)
                                               FROM jsonb_array_elements(r.attempts) a)))::float8 AS first_start,
       extract(epoch FROM r.finished_at)::float8 AS finished,
       (SELECT array_agg(d.parent_id::text || ' ' || d.on_parent_failure ORDER BY d.parent_id)
        FROM run_dependencies d WHERE d.child_id = r.id) AS edges
FROM job_runs r WHERE r.tenant_id = $1 AND r.job = ANY($2::text[])
"""


async def gather(fetch: Callable[..., Awaitable[Sequence[Any]]], tenant: str) -> list[Step]:
    rows = await fetch(GATHER, tenant, list(JOBS))
    return [
        Step(
            r["id"],
            r["job"],
            r["status"],
            r["held"],
            r["epoch"],
            r["first_start"],
            r["finished"],
            tuple(Edge(*edge.split(" ")) for edge in r["edges"] or ()),
        )
        for r in rows
    ]


def _settled(edge: Edge, parent: Step) -> bool:
    return parent.status == "succeeded" or (edge.on_parent_failure == "run" and parent.status in TERMINAL)


def _released(step: Step, steps: dict[str, Step]) -> bool:
    """Every parent of the step is there and settled it: it must run."""
    return all((p := steps.get(e.parent)) is not None and _settled(e, p) for e in step.parents)


def _doomed_by(step: Step, steps: dict[str, Step]) -> Step | None:
    """A 'cancel' parent of the step that ended and did not succeed: the step must never run."""
    return next(
        (
            p
            for e in step.parents
            if e.on_parent_failure == "cancel"
            and (p := steps.get(e.parent)) is not None
            and p.status in TERMINAL
            and p.status != "succeeded"
        ),
        None,
    )


@dataclass(frozen=True)
class Calls:
    """The receiver's attempts per run: the first arrival, and the end of the call under each epoch."""

    first: dict[str, float]
    ended: dict[tuple[str, int], float]

    @classmethod
    def of(cls, calls: Sequence[Call]) -> Calls:
        first: dict[str, float] = {}
        ended: dict[tuple[str, int], float] = {}
        for c in calls:
            run = c.headers.get("scheduler-run-id")
            if c.is_callback or run is None:
                continue
            first[run] = min(first.get(run, c.started), c.started)
            if c.ended is not None:
                ended[(run, int(c.headers.get("scheduler-epoch", 0)))] = c.ended
        return cls(first, ended)


def parents_first(r: Report) -> list[str]:
    steps = {s.id: s for s in r.outcome.graph_steps}
    calls = Calls.of(r.outcome.calls)
    early, unsettled, ran_doomed = [], [], []
    for s in steps.values():
        for e in s.parents:
            p = steps.get(e.parent)
            if p is None:
                continue  # a parent missing: graphs_kept names it
            if s.first_start is not None:
                if p.finished is None or p.finished > s.first_start:
                    early.append(f"{s.id} started before its parent {p.id} ended (database)")
                elif not _settled(e, p):
                    unsettled.append(f"{s.id} started though its parent {p.id} ended {p.status}")
            parent_call = calls.ended.get((p.id, p.epoch))
            if s.id in calls.first and parent_call is not None and calls.first[s.id] < parent_call:
                early.append(f"{s.id} called before its parent {p.id}'s last call ended (receiver)")
        doomed = _doomed_by(s, steps)
        if doomed is not None and (
            s.status != "cancelled" or s.first_start is not None or s.id in calls.first
        ):
            ran_doomed.append(f"{s.id} {s.status} (its parent {doomed.id} ended {doomed.status})")
    out = []
    if early:
        out.append(f"{len(early)} graph steps started before a parent ended{_e(early)}")
    if unsettled:
        out.append(
            f"{len(unsettled)} graph steps started though a 'cancel' parent did not succeed{_e(unsettled)}"
        )
    if ran_doomed:
        out.append(
            f"{len(ran_doomed)} graph steps whose 'cancel' parent did not succeed were not cancelled "
            f"unstarted{_e(ran_doomed)}"
        )
    return out


def none_held_forever(r: Report) -> list[str]:
    steps = {s.id: s for s in r.outcome.graph_steps}
    out = []
    open_ = [f"{s.id} {s.status} held {s.held}" for s in steps.values() if s.status not in TERMINAL]
    forever = [
        s.id
        for s in steps.values()
        if s.status == "pending"
        and s.held == "dependencies"
        and all(p is not None and p.status in TERMINAL for p in (steps.get(e.parent) for e in s.parents))
    ]
    released = [
        f"{s.id} {s.status}"
        for s in steps.values()
        if s.job == STEP_JOB and _released(s, steps) and s.status != "succeeded"
    ]
    if forever:
        out.append(
            f"{len(forever)} graph steps held 'dependencies' though their parents have all ended{_e(forever)}"
        )
    if open_:
        out.append(f"{len(open_)} graph steps not terminal after the drain{_e(open_)}")
    if released:
        out.append(f"{len(released)} graph steps their parents all settled did not succeed{_e(released)}")
    return out


def graphs_kept(r: Report) -> list[str]:
    steps = {s.id: s for s in r.outcome.graph_steps}
    accepted = r.outcome.graph_accepted
    out = []
    lost = [i for i in accepted if i not in steps]
    if lost:
        out.append(f"{len(lost)} accepted graph runs lost{_e(lost)}")
    unasked = [i for i in steps if i not in accepted]
    if unasked:
        out.append(f"{len(unasked)} graph runs the API never answered for{_e(unasked)}")
    edges = [
        f"{i}: submitted {sorted(parents)}, recorded {sorted(e.parent for e in steps[i].parents)}"
        for i, parents in accepted.items()
        if i in steps and sorted(parents) != sorted(e.parent for e in steps[i].parents)
    ]
    if edges:
        out.append(f"{len(edges)} graph runs whose edges differ from their submission{_e(edges)}")
    return out


@dataclass(frozen=True)
class Figures:
    """How many of the graphs' runs each check had to judge."""

    graphs: int  # runs without parents
    steps: int
    released: int  # started after every parent succeeded
    cancelled_by_failure: int  # cancelled, a 'cancel' parent failed
    cancelled_through: int  # cancelled, a 'cancel' parent was cancelled
    ran_after_failure: int  # started, a 'run' parent did not succeed
    quickest: float | None  # the least seconds from a step's last parent's end to its first start

    def render(self) -> str:
        quickest = "-" if self.quickest is None else f"{self.quickest:.3f}s"
        return (
            f"{self.steps} runs ({self.graphs} without parents); {self.released} started after their parents "
            f"succeeded (quickest {quickest} after the last), {self.cancelled_by_failure} cancelled by a failed "
            f"parent and {self.cancelled_through} through a cancelled one, {self.ran_after_failure} ran after "
            "a parent failed"
        )


def figures(steps: Sequence[Step]) -> Figures:
    by_id = {s.id: s for s in steps}
    released = by_failure = through = after_failure = 0
    gaps = []
    for s in steps:
        parents = [p for e in s.parents if (p := by_id.get(e.parent)) is not None]
        if not parents:
            continue
        if s.first_start is not None:
            ends = [p.finished for p in parents if p.finished is not None]
            if ends:
                gaps.append(s.first_start - max(ends))
            released += all(p.status == "succeeded" for p in parents)
            after_failure += any(p.status != "succeeded" for p in parents)
        doomed = _doomed_by(s, by_id)
        if s.status == "cancelled" and doomed is not None:
            by_failure += doomed.status == "failed"
            through += doomed.status == "cancelled"
    return Figures(
        sum(1 for s in steps if not s.parents),
        len(steps),
        released,
        by_failure,
        through,
        after_failure,
        min(gaps, default=None),
    )


def graphs_under_pressure(r: Report) -> list[str]:
    f = figures(r.outcome.graph_steps)
    out = []
    missing = [
        name
        for name, n in (
            ("started after its parents succeeded", f.released),
            ("cancelled by a failed parent", f.cancelled_by_failure),
            ("cancelled through a cancelled parent", f.cancelled_through),
            ("ran after a parent failed", f.ran_after_failure),
        )
        if not n
    ]
    if missing:
        out.append(f"no graph step {' / '.join(missing)}: the dependencies' checks saw nothing there")
    struck = {fault.kind for fault in r.outcome.faults if fault.parents}
    unstruck = [k for k in PARENT_FAULT_KINDS if k not in struck]
    if unstruck:
        out.append(f"faults that never struck with graph parents in flight: {unstruck}")
    return out


def no_deadlock_in_release(r: Report) -> list[str]:
    found = [
        d
        for d in r.outcome.deadlocks
        if any(s in d for s in DEPENDENCY_STATEMENTS) and SUBMISSION_LOCKING_PARENTS not in d
    ]
    return [f"{len(found)} deadlocks in a dependency's statements{_e(found)}"] if found else []


CHECKS = [parents_first, none_held_forever, graphs_kept, graphs_under_pressure, no_deadlock_in_release]


def _e(items: Sequence[object]) -> str:
    from tests.faults.report import _examples  # report.py imports this module's checks

    return _examples(items)
