"""The fault harness's verdict: invariants checked over the database's runs and the receiver's calls.

Definitions, per run submitted:
- lost: submitted, but absent from the database. Must be 0.
- stuck: present, but not terminal once the drain ended. Must be 0.
- same-epoch duplicates: receiver calls beyond the first for one (run id, epoch). Each attempt starts
  at most once in the database (the epoch fence), so any is a violation. Must be 0.
- redeliveries (allowed): the distinct (run, epoch) pairs beyond the first for one run: a run called
  again under a newer epoch after it was rescued (worker killed or frozen, lease lapsed).
- never called: a run the receiver never saw. With a generous max_attempts every run must succeed,
  so every run must have been called, and the call under its final epoch must be among them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

FAULT_KINDS = ("kill -9 api", "kill -9 worker", "restart nats", "restart postgres", "SIGSTOP worker")
TERMINAL = ("succeeded", "failed", "cancelled")


@dataclass(frozen=True)
class Fault:
    at: float  # seconds since the harness started
    wall: str  # UTC, for matching the process logs
    kind: str
    detail: str

    def render(self) -> str:
        return f"t={self.at:6.1f}s  {self.wall}  {self.kind}: {self.detail}"


@dataclass
class Report:
    runs: int
    elapsed: float
    faults: list[Fault]
    statuses: dict[str, int]
    lost: int
    stuck: int
    over_max_attempts: int
    calls: int
    distinct_run_epochs: int
    same_epoch_duplicates: int
    runs_called_in_one_epoch_twice: int
    redeliveries: int
    runs_redelivered: int
    never_called: int
    final_epoch_not_called: int
    max_attempt_seen: int
    # The frozen worker's late results that the epoch fence discarded (its stale "finish" counter
    # across the freeze), and every live worker's stale counters at the end, for the record.
    late_results_discarded: float = 0.0
    stale_results: dict[str, float] = field(default_factory=dict)  # "<worker> <stage>" -> count
    examples: list[str] = field(default_factory=list)
    died: list[str] = field(default_factory=list)  # processes that exited without being killed

    def violations(self) -> list[str]:
        out = []
        if self.lost:
            out.append(f"{self.lost} runs lost")
        if self.stuck:
            out.append(f"{self.stuck} runs not terminal after the drain")
        if self.over_max_attempts:
            out.append(f"{self.over_max_attempts} runs with attempt > max_attempts")
        if self.same_epoch_duplicates:
            out.append(f"{self.same_epoch_duplicates} calls repeated a (run, epoch) already called")
        if self.never_called:
            out.append(f"{self.never_called} runs never reached the receiver")
        if self.final_epoch_not_called:
            out.append(f"{self.final_epoch_not_called} succeeded runs without a call under their final epoch")
        not_ok = {s: n for s, n in self.statuses.items() if s != "succeeded"}
        if not_ok:
            out.append(f"runs not succeeded despite a generous max_attempts: {not_ok}")
        if self.died:
            out.append(f"processes exited on their own: {self.died}")
        missing = [k for k in FAULT_KINDS if k not in {f.kind for f in self.faults}]
        if missing:
            out.append(f"faults not injected: {missing}")
        if "SIGSTOP worker" not in missing and not self.late_results_discarded:
            out.append("the frozen worker's late results were not seen discarded (stale finish counter is 0)")
        return out

    def render(self) -> str:
        lines = [
            "── fault harness ──",
            f"runs submitted          {self.runs}",
            f"elapsed                 {self.elapsed:.1f}s",
            f"faults injected         {sum(1 for f in self.faults if f.kind in FAULT_KINDS)}",
            *(f"  {f.render()}" for f in self.faults),
            f"final statuses          {self.statuses}",
            f"runs lost               {self.lost}",
            f"runs not terminal       {self.stuck}",
            f"attempt > max_attempts  {self.over_max_attempts} (highest attempt {self.max_attempt_seen})",
            f"receiver calls          {self.calls} for {self.distinct_run_epochs} distinct (run, epoch)",
            f"same-epoch duplicates   {self.same_epoch_duplicates} (in {self.runs_called_in_one_epoch_twice} "
            "runs; must be 0)",
            f"redeliveries by epoch   {self.redeliveries} (in {self.runs_redelivered} runs; allowed)",
            f"runs never called       {self.never_called}",
            f"processes that died     {len(self.died)} (not killed by the harness)",
            f"late results discarded  {self.late_results_discarded:g} (stale counters: {self.stale_results})",
        ]
        violations = self.violations()
        lines.append(
            "verdict                 " + ("OK" if not violations else "FAILED: " + "; ".join(violations))
        )
        lines += [f"  e.g. {e}" for e in self.examples]
        return "\n".join(lines)


def check(
    died: list[str],
    ids: Sequence[str],
    rows: Sequence[Any],
    calls: Sequence[Any],
    faults: list[Fault],
    late_results_discarded: float,
    stale: dict[str, float],
    elapsed: float,
) -> Report:
    """`rows`: the tenant's runs (id, status, attempt, max_attempts, epoch); `calls`: the receiver's."""
    submitted = set(ids)
    db = {r["id"]: r for r in rows}
    pairs = Counter(
        (c.headers["scheduler-run-id"], int(c.headers["scheduler-epoch"]))
        for c in calls
        if c.headers.get("scheduler-run-id") in submitted
    )
    per_run = Counter(run for run, _ in pairs)
    duplicated = {pair: n for pair, n in pairs.items() if n > 1}
    succeeded = [r for r in rows if r["status"] == "succeeded"]
    examples = [
        f"(run {run}, epoch {epoch}) called {n} times" for (run, epoch), n in list(duplicated.items())[:5]
    ]
    stuck = [r for r in rows if r["status"] not in TERMINAL]
    examples += [f"run {r['id']} stuck in {r['status']} at epoch {r['epoch']}" for r in stuck[:5]]
    return Report(
        runs=len(ids),
        elapsed=elapsed,
        faults=faults,
        statuses=dict(Counter(r["status"] for r in rows)),
        lost=len(submitted - db.keys()),
        stuck=len(stuck),
        over_max_attempts=sum(1 for r in rows if r["attempt"] > r["max_attempts"]),
        calls=sum(pairs.values()),
        distinct_run_epochs=len(pairs),
        same_epoch_duplicates=sum(n - 1 for n in duplicated.values()),
        runs_called_in_one_epoch_twice=len({run for run, _ in duplicated}),
        redeliveries=len(pairs) - len(per_run),
        runs_redelivered=sum(1 for n in per_run.values() if n > 1),
        never_called=len(submitted - per_run.keys()),
        final_epoch_not_called=sum(1 for r in succeeded if (r["id"], r["epoch"]) not in pairs),
        max_attempt_seen=max((r["attempt"] for r in rows), default=0),
        late_results_discarded=late_results_discarded,
        stale_results=stale,
        examples=examples,
        died=died,
    )
