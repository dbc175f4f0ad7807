"""The fault harness's verdict: checks over what was observed — the database's runs, the receiver's
log, the API's answers and what each fault found in flight — never over notes the harness writes
unconditionally. `check(outcome)` computes the figures; `Report.violations()` runs every check in
CHECKS (later harness extensions add theirs there).

Definitions, for the victim (well-behaved) tenant's runs:
- lost: accepted by the API (201, or 200 replaying the run a lost answer created), absent from the
  database. Must be 0. Unasked: victim runs in the database the API never answered for (a retried
  request that created a second run). Must be 0.
- stuck: not terminal once the drain ended (for both tenants). Must be 0.
- same-epoch duplicates: receiver calls beyond the first for one (run, epoch). Must be 0.
- never called / final epoch not called: with a generous max_attempts every victim run must succeed,
  and the receiver must have seen it under the epoch the database recorded it succeeded in.
- attempt > max_attempts: per run, from the database and from the receiver's Scheduler-Attempt.
- due lag: started_at - due_at of the run's last attempt, from the database; each phase has a bound.
- callbacks: every terminal victim run names a callback; its latest obligation must be `delivered` in
  the database and the receiver must have seen it (at least once: repeats are allowed), through the
  kill -9 of a worker holding callbacks mid-delivery.
For the limited tenant's job (`concurrency: {"limit": L, "key": "payload.k"}`, a few keys, its
runs held back behind their slots while the faults strike):
- over limit: attempts the receiver saw arrive while L others of their key were still in flight
  there (tests/receiver.py counts a request from its arrival until its response is sent or its
  caller's connection closes). Must be 0; and some key must have reached L at once, or the check saw
  no pressure and proves nothing.
- every limited run must succeed (generous max_attempts) and be called; the checks above (not
  terminal, one start per epoch, attempt > max_attempts) cover its runs too.
- the kill -9 of a worker, of NATS and the Postgres crash must each have struck with runs of the
  limited job holding a slot (`Fault.limited > 0`); the worker's kill with its requests in flight at
  the receiver, which must see them end (their connection close) before the slot's lease could lapse.
  Such an orphan is not excused: the receiver counts it until it hangs up, and a kill -9 hangs it up
  at once (tests/faults/test_receiver.py shows it), long before the reaper frees its slot.
  Not excused either: a frozen worker's calls. One frozen between its fenced start and its request
  would send it after the thaw, when its slot may be another run's (the worker does not check its
  lease before sending); the check would then name that (run, epoch) — a finding, not noise.
For the victim's groups and graphs: tests/faults/groups.py and tests/faults/dependencies.py say
what their checks require (every group fires exactly once; no dependent starts before its parents
succeeded, none is left held, no accepted graph is lost).
For the hostile tenant's paused job (hostile.retry_past_a_pause): its cancelled runs retried one
by one and in bulk under the pause are held through the faults, so none may reach the receiver.
A fault counts only if it landed: work was in flight at that moment (`Fault.in_flight > 0`), and a
fault whose own postcondition failed (the stream lost at a NATS crash, no crash recovery after a
Postgres crash) says so in `Fault.problem`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tests.faults import dependencies
from tests.faults.dependencies import Step
from tests.faults.dependencies import figures as graph_figures
from tests.faults.groups import GroupOutcome, each_group_fires_once
from tests.faults.groups import render as render_groups
from tests.receiver import Call

FAULT_KINDS = (
    "kill -9 api",
    "kill -9 engine",
    "kill -9 worker",
    "kill -9 nats",
    "crash postgres",
    "SIGSTOP worker",
    "kill -9 worker delivering callbacks",
)
HOSTILE_BEHAVIOURS = ("hang", "nul", "huge")  # receiver answers the hostile tenant must have drawn
TERMINAL = ("succeeded", "failed", "cancelled", "expired")
TENANTS = ("victim", "hostile", "limited")
# Faults that must strike with the limited job's runs holding slots (an engine's claims are brief
# and few: its kill is reported with how many limited ones it held, not required to hold one).
LIMITED_FAULT_KINDS = ("kill -9 worker", "kill -9 nats", "crash postgres")
PHASES = ("quiet", "hostile", "faults")  # victim alone; beside the hostile tenant; and under faults


@dataclass(frozen=True)
class Fault:
    at: float  # seconds since the harness started
    wall: str  # UTC, for matching the process logs
    kind: str
    detail: str
    in_flight: int | None = None  # work in flight when it landed; None: a note (e.g. a restart done)
    problem: str = ""  # the fault's own postcondition failed
    held: tuple[tuple[str, int], ...] = ()  # (run, epoch) the killed process held: a dead engine's claims
    limited: int | None = None  # runs of the concurrency-limited job it struck (holding a slot)
    parents: int | None = None  # runs of the victim's graphs with dependents, due, claimed or running

    def render(self) -> str:
        landed = "" if self.in_flight is None else f" [in flight: {self.in_flight}"
        landed += "" if self.limited is None else f", limited: {self.limited}"
        landed += "" if self.parents is None else f", graph parents: {self.parents}"
        landed += "" if self.in_flight is None else "]"
        problem = f" PROBLEM: {self.problem}" if self.problem else ""
        return f"t={self.at:6.1f}s  {self.wall}  {self.kind}: {self.detail}{landed}{problem}"


@dataclass(frozen=True)
class Run:
    """One run as the database has it at the end."""

    id: str
    tenant: str  # TENANTS
    status: str
    attempt: int
    max_attempts: int
    epoch: int
    phase: str = "faults"  # when it was scheduled (PHASES)
    lag: float | None = None  # seconds from due_at to started_at of its last attempt (or to now, waiting)
    due: float | None = None  # when it fell due, and when its last attempt started, in seconds since
    started: float | None = None  # the harness began (Fault.at's clock); None: not yet


@dataclass(frozen=True)
class PoisonAnswer:
    """One hostile request at the API and what it did."""

    name: str
    status: int
    written: int  # rows of the hostile tenant's jobs and runs the request added
    refuse: bool = True  # invalid input: must be a 4xx with nothing written; else it must be a 201


@dataclass
class Door:
    """Slow and half-sent connections held at the APIs beside everyone (hostile.hold_the_door), and
    /healthz probed meanwhile."""

    head_timeout: float  # the APIs' SCHEDULER_HTTP_HEAD_TIMEOUT_SECONDS
    opened: int = 0
    cut: int = 0  # closed by the server
    refused: int = 0  # connections that could not be opened
    longest: float = 0.0  # seconds the longest-lived slow connection stayed open
    probes: int = 0
    probe_failures: int = 0
    slowest_probe: float = 0.0

    def render(self) -> str:
        return (
            f"{self.opened} opened, {self.cut} cut by the server (longest open {self.longest:.1f}s, "
            f"head timeout {self.head_timeout:g}s), {self.refused} refused; /healthz {self.probes} probes, "
            f"{self.probe_failures} failed, slowest {self.slowest_probe:.2f}s"
        )


@dataclass
class Outcome:
    """Everything the harness observed, as plain data (fabricated by the checks' own tests)."""

    accepted: list[str]  # victim run ids the API accepted
    runs: list[Run]  # both tenants' runs in the database
    calls: list[Call]  # the receiver's log
    faults: list[Fault]
    lag_bounds: dict[str, float]  # phase -> the most a victim run may wait past its due time
    poison_answers: list[PoisonAnswer] = field(default_factory=list)
    poison_run: str | None = None  # the run made poison in the database, behind the API's back
    hostile_answers: tuple[str, ...] = HOSTILE_BEHAVIOURS  # the hostile answers the harness asked for
    died: list[str] = field(default_factory=list)  # processes that exited without being killed
    problems: list[str] = field(default_factory=list)  # requests the harness could not get answered
    late_results_discarded: float = 0.0  # the frozen worker's stale "finish" counter across the freeze
    stale: dict[str, float] = field(default_factory=dict)  # "<worker> <stage>" -> count, for the record
    worker_rss_mib: float = 0.0  # the highest worker RSS sampled, for the record
    elapsed: float = 0.0
    callbacks: dict[str, str] = field(default_factory=dict)  # victim run -> its latest callback's status
    limit: int = 0  # the limited job's concurrency limit per key (0: the harness ran no limited job)
    door: Door | None = None  # slow connections held during the hostile phase (None: none)
    paused_runs: list[str] = field(default_factory=list)  # runs retried under their job's pause
    # (seconds since the harness began, HTTP status) of every answer to the victim's one-by-one
    # submissions, which go on through the fault window.
    answered: list[tuple[float, int]] = field(default_factory=list)
    groups: list[GroupOutcome] = field(default_factory=list)  # the victim's groups (tests/faults/groups.py)
    groups_submitted: list[str] = field(default_factory=list)  # the group ids the API answered
    # The victim's graphs (tests/faults/graphs.py): their runs in the database, and what the API
    # accepted (run id -> its parents' ids as submitted).
    graph_steps: list[Step] = field(default_factory=list)
    graph_accepted: dict[str, tuple[str, ...]] = field(default_factory=dict)
    deadlocks: list[str] = field(default_factory=list)  # as the Postgres log tells each (stack.deadlocks)


@dataclass
class Report:
    outcome: Outcome
    statuses: dict[str, dict[str, int]]  # tenant -> status -> count
    lost: list[str]
    unasked: list[str]
    stuck: list[Run]
    over_max_attempts: list[str]  # "<run>: attempt a of m (database|receiver)"
    same_epoch_duplicates: dict[tuple[str, int], int]
    redeliveries: int
    never_called: list[str]
    final_epoch_not_called: list[str]
    victims_not_succeeded: dict[str, int]
    lag: dict[str, list[float]]  # phase -> victim lags, sorted
    over_lag_bound: list[str]
    behaviours: Counter[str]  # hostile answers the receiver gave; "hang abandoned": timeouts hit
    unlanded: list[str]  # fault kinds required that never landed with work in flight
    claims_never_delivered: int  # of the killed engines' claims: never called under that epoch
    callbacks_undelivered: list[str]  # terminal victim runs whose callback is not `delivered`
    callbacks_never_received: list[str]  # terminal victim runs the receiver saw no callback for
    callback_repeats: int  # callbacks received more than once (allowed: at least once)
    limited_peaks: dict[str, int]  # key -> the most requests of it in flight at the receiver at once
    over_limit: list[str]  # attempts that arrived with `limit` others of their key in flight
    limited_not_called: list[str]  # limited runs the receiver never saw
    paused_runs_called: list[str]  # runs retried under their job's pause that the receiver saw

    def violations(self) -> list[str]:
        return [v for check in CHECKS for v in check(self)]

    def percentile(self, phase: str, q: float) -> float:
        lags = self.lag.get(phase, [])
        return lags[min(len(lags) - 1, int(q * len(lags)))] if lags else math.nan

    def render(self) -> str:
        o = self.outcome
        lines = [
            "── fault harness ──",
            f"victim runs accepted    {len(o.accepted)}; hostile runs {self.statuses.get('hostile', {})}",
            f"elapsed                 {o.elapsed:.1f}s",
            f"faults landed           {sum(1 for f in o.faults if f.in_flight)} of "
            f"{sum(1 for f in o.faults if f.in_flight is not None)} injected",
            *(f"  {f.render()}" for f in o.faults),
            f"victim statuses         {self.statuses.get('victim', {})}",
            f"runs lost / unasked     {len(self.lost)} / {len(self.unasked)}",
            f"runs not terminal       {len(self.stuck)}",
            f"attempt > max_attempts  {len(self.over_max_attempts)}",
            f"same-epoch duplicates   {sum(n - 1 for n in self.same_epoch_duplicates.values())} (must be 0); "
            f"redeliveries by epoch {self.redeliveries} (allowed)",
            f"victims never called    {len(self.never_called)}; succeeded without a call at their final "
            f"epoch {len(self.final_epoch_not_called)}",
            "victim due lag (s)      "
            + "; ".join(
                f"{phase}: p50 {self.percentile(phase, 0.5):.2f} p99 {self.percentile(phase, 0.99):.2f} "
                f"max {self.percentile(phase, 1.0):.2f} (n={len(self.lag.get(phase, []))}, "
                f"bound {o.lag_bounds.get(phase, math.inf):g})"
                for phase in PHASES
            ),
            f"dead engines' claims    {sum(len(f.held) for f in o.faults)} held at the kill, "
            f"{self.claims_never_delivered} never delivered under that epoch (unpublished: the lease rescued them)",
            f"victim callbacks        {len(self.callbacks_undelivered)} not delivered "
            f"{dict(Counter(o.callbacks.get(i, 'none owed') for i in self.callbacks_undelivered))}, "
            f"{len(self.callbacks_never_received)} never received; {self.callback_repeats} received again (allowed)",
            "concurrency limit       "
            + (
                f"{o.limit} per key; most in flight at the receiver per key "
                f"{dict(sorted(self.limited_peaks.items()))}; {len(self.over_limit)} attempts over the limit; "
                f"limited runs {self.statuses.get('limited', {})}"
                if o.limit
                else "no limited job"
            ),
            f"hostile answers         {dict(self.behaviours)}",
            "poison at the API       "
            + ", ".join(
                f"{a.name} → {a.status}{f' +{a.written} rows' if a.written else ''}" for a in o.poison_answers
            ),
            f"slow connections        {o.door.render() if o.door else 'none'}",
            f"retried under a pause   {len(o.paused_runs)} runs, {len(self.paused_runs_called)} reached the receiver",
            f"victim groups           {render_groups(o.groups)}",
            f"victim graphs           {graph_figures(o.graph_steps).render()}; "
            f"{len(o.graph_accepted)} runs accepted",
            f"postgres deadlocks      {len(o.deadlocks)}{_examples(o.deadlocks, 1)}",
            f"victim submissions      {len(o.answered)} answered one by one {dict(Counter(s for _, s in o.answered))}",
            "per fault",
            *(f"  {figures.render()}" for figures in per_fault(o)),
            f"processes that died     {len(o.died)} (not killed by the harness) {o.died}",
            f"late results discarded  {o.late_results_discarded:g} (stale counters: {o.stale})",
            f"worker RSS peak         {o.worker_rss_mib:.0f} MiB",
        ]
        violations = self.violations()
        lines.append("verdict                 " + ("OK" if not violations else "FAILED"))
        lines += [f"  ✗ {v}" for v in violations]
        return "\n".join(lines)


def _examples(items: Sequence[object], n: int = 3) -> str:
    shown = ", ".join(str(i) for i in items[:n])
    return f" (e.g. {shown})" if items else ""


# ── the checks: each returns its violations; each has a test feeding it a bad outcome ──


def no_run_lost(r: Report) -> list[str]:
    out = []
    if r.lost:
        out.append(f"{len(r.lost)} accepted runs lost{_examples(r.lost)}")
    if r.unasked:
        out.append(f"{len(r.unasked)} victim runs the API never answered for{_examples(r.unasked)}")
    if r.final_epoch_not_called:
        out.append(
            f"{len(r.final_epoch_not_called)} runs succeeded without a call under their final epoch"
            f"{_examples(r.final_epoch_not_called)}"
        )
    return out


def every_run_ends(r: Report) -> list[str]:
    out = []
    if r.stuck:
        out.append(
            f"{len(r.stuck)} runs not terminal after the drain{_examples([f'{s.tenant} {s.id} {s.status}' for s in r.stuck])}"
        )
    if r.never_called:
        out.append(f"{len(r.never_called)} victim runs never reached the receiver{_examples(r.never_called)}")
    if r.victims_not_succeeded:
        out.append(f"victim runs not succeeded despite a generous max_attempts: {r.victims_not_succeeded}")
    if r.outcome.poison_run and r.outcome.poison_run in {s.id for s in r.stuck}:
        out.append(f"the poison run {r.outcome.poison_run} was never contained (not terminal)")
    return out


def attempts_within_max(r: Report) -> list[str]:
    if not r.over_max_attempts:
        return []
    return [f"{len(r.over_max_attempts)} runs with attempt > max_attempts{_examples(r.over_max_attempts)}"]


def one_start_per_epoch(r: Report) -> list[str]:
    if not r.same_epoch_duplicates:
        return []
    pairs = [f"run {run} epoch {epoch} x{n}" for (run, epoch), n in r.same_epoch_duplicates.items()]
    return [
        f"{sum(n - 1 for n in r.same_epoch_duplicates.values())} calls repeated a (run, epoch){_examples(pairs)}"
    ]


def due_lag_bounded(r: Report) -> list[str]:
    if not r.over_lag_bound:
        return []
    return [
        f"{len(r.over_lag_bound)} victim runs waited past their phase's due-lag bound{_examples(r.over_lag_bound)}"
    ]


def faults_landed(r: Report) -> list[str]:
    out = []
    if r.unlanded:
        out.append(f"faults that never landed with work in flight: {r.unlanded}")
    out += [f"{f.kind}: {f.problem}" for f in r.outcome.faults if f.problem]
    kinds = {f.kind for f in r.outcome.faults if f.in_flight}
    if "SIGSTOP worker" in kinds and not r.outcome.late_results_discarded:
        out.append("the frozen worker's late results were not seen discarded (stale finish counter is 0)")
    return out


def hostile_contained(r: Report) -> list[str]:
    out = []
    for a in r.outcome.poison_answers:
        if a.refuse and not (400 <= a.status < 500 and a.written == 0):
            out.append(
                f"poison '{a.name}' answered {a.status} and wrote {a.written} rows (want a 4xx, nothing written)"
            )
        elif not a.refuse and not (200 <= a.status < 300):
            out.append(f"valid hostile input '{a.name}' answered {a.status} (want 201)")
    missing = [b for b in r.outcome.hostile_answers if not r.behaviours[b]]
    if missing:
        out.append(f"hostile endpoints never answered: {missing}")
    if r.behaviours["hang"] and not r.behaviours["hang abandoned"]:
        out.append("no hanging endpoint was abandoned by its caller: timeouts never hit")
    out += [f"harness request failed: {p}" for p in r.outcome.problems]
    door = r.outcome.door
    if door is not None:
        # A connection lives at most the head timeout, plus a drip's second and the loop's slack.
        if door.longest > door.head_timeout + 3:
            out.append(
                f"a slow connection stayed open {door.longest:.1f}s (head timeout {door.head_timeout:g}s)"
            )
        if not door.cut:
            out.append("no slow connection was cut by the server")
        if door.probe_failures:
            out.append(
                f"/healthz failed {door.probe_failures} of {door.probes} probes beside slow connections"
            )
    if r.outcome.died:
        out.append(f"processes exited on their own or never became ready: {r.outcome.died}")
    return out


def every_callback_delivered(r: Report) -> list[str]:
    out = []
    if r.callbacks_undelivered:
        out.append(
            f"{len(r.callbacks_undelivered)} terminal victim runs' callbacks not delivered"
            f"{_examples(r.callbacks_undelivered)}"
        )
    if r.callbacks_never_received:
        out.append(
            f"{len(r.callbacks_never_received)} terminal victim runs' callbacks never reached the receiver"
            f"{_examples(r.callbacks_never_received)}"
        )
    return out


def limits_hold(r: Report) -> list[str]:
    if not r.outcome.limit:
        return []
    out = []
    if r.over_limit:
        out.append(
            f"{len(r.over_limit)} attempts arrived at the receiver with more than {r.outcome.limit} of their "
            f"key in flight{_examples(r.over_limit)}"
        )
    if max(r.limited_peaks.values(), default=0) < r.outcome.limit:
        out.append(
            f"no key of the limited job ever had {r.outcome.limit} requests in flight at once "
            f"(peaks {r.limited_peaks}): the limit was never under pressure"
        )
    failed = {s: n for s, n in r.statuses.get("limited", {}).items() if s != "succeeded"}
    if failed:
        out.append(f"limited runs not succeeded despite a generous max_attempts: {failed}")
    if not r.statuses.get("limited"):
        out.append("the limited job has no runs")
    if r.limited_not_called:
        out.append(
            f"{len(r.limited_not_called)} limited runs never reached the receiver{_examples(r.limited_not_called)}"
        )
    struck = {f.kind for f in r.outcome.faults if f.limited}
    missing = [k for k in LIMITED_FAULT_KINDS if k not in struck]
    if missing:
        out.append(f"faults that never struck the limited job's runs holding a slot: {missing}")
    return out


@dataclass(frozen=True)
class FaultFigures:
    """What one fault cost, over its slot (until the next fault): seconds from it to the first
    accepted submission and to the first run started after it; the p99 due lag of the victim's runs
    that fell due in the slot; the 5xx answers other than 503 in the slot (must be 0)."""

    fault: Fault
    first_submission: float | None
    first_start: float | None
    p99_lag: float | None
    other_5xx: int

    def render(self) -> str:
        def s(x: float | None) -> str:
            return "-" if x is None else f"{x:.2f}s"

        return (
            f"{self.fault.kind:<34} first 2xx after {s(self.first_submission):>7}, first start after "
            f"{s(self.first_start):>7}, p99 lag of runs due in its slot {s(self.p99_lag):>7}, "
            f"5xx other than 503: {self.other_5xx}"
        )


def per_fault(o: Outcome) -> list[FaultFigures]:
    faults = sorted((f for f in o.faults if f.in_flight is not None), key=lambda f: f.at)
    out = []
    for i, f in enumerate(faults):
        end = faults[i + 1].at if i + 1 < len(faults) else math.inf
        lags = sorted(
            r.lag
            for r in o.runs
            if r.tenant == "victim" and r.due is not None and f.at <= r.due < end
            if r.lag is not None
        )
        oks = [t for t, status in o.answered if t >= f.at and status < 300]
        starts = [r.started for r in o.runs if r.started is not None and r.started >= f.at]
        out.append(
            FaultFigures(
                f,
                min(oks) - f.at if oks else None,
                min(starts) - f.at if starts else None,
                lags[min(len(lags) - 1, int(0.99 * len(lags)))] if lags else None,
                sum(1 for t, status in o.answered if f.at <= t < end and status >= 500 and status != 503),
            )
        )
    return out


def only_503s(r: Report) -> list[str]:
    """A submission is answered, or refused with 503 while the database is away: never another 5xx."""
    other = Counter(status for _, status in r.outcome.answered if status >= 500 and status != 503)
    return [f"the victim's submissions were answered {dict(other)}: a 5xx other than 503"] if other else []


def pause_holds(r: Report) -> list[str]:
    """A paused job's runs, retried under the pause, never reach their target."""
    if not r.paused_runs_called:
        return []
    return [
        f"{len(r.paused_runs_called)} runs retried under their job's pause reached the receiver"
        f"{_examples(r.paused_runs_called)}"
    ]


CHECKS: list[Callable[[Report], list[str]]] = [
    no_run_lost,
    every_run_ends,
    attempts_within_max,
    one_start_per_epoch,
    due_lag_bounded,
    faults_landed,
    hostile_contained,
    every_callback_delivered,
    limits_hold,
    pause_holds,
    only_503s,
    each_group_fires_once,
    *dependencies.CHECKS,
]


def over_limit(calls: Sequence[Call], limit: int) -> list[str]:
    """The keyed attempts the receiver saw arrive with more than `limit` of their key in flight
    (itself included), as "<run> epoch <e> key <k>: n in flight"."""
    return [
        f"{c.headers.get('scheduler-run-id', '?')} epoch {c.headers.get('scheduler-epoch', '?')} "
        f"key {c.key!r}: {c.concurrent} in flight"
        for c in calls
        if c.key is not None and c.concurrent > limit
    ]


def peaks(calls: Sequence[Call]) -> dict[str, int]:
    """Per key, the most requests of it in flight at the receiver at once."""
    peak: dict[str, int] = {}
    for c in calls:
        if c.key is not None:
            peak[c.key] = max(peak.get(c.key, 0), c.concurrent)
    return peak


def check(o: Outcome) -> Report:
    by_id = {run.id: run for run in o.runs}
    victims = [run for run in o.runs if run.tenant == "victim"]
    limited = [run for run in o.runs if run.tenant == "limited"]
    accepted = set(o.accepted)
    attempts = [c for c in o.calls if not c.is_callback]
    pairs = Counter(
        (c.headers["scheduler-run-id"], int(c.headers["scheduler-epoch"]))
        for c in attempts
        if c.headers.get("scheduler-run-id") in by_id
    )
    callbacks_received = Counter(c.headers.get("scheduler-run-id") for c in o.calls if c.is_callback)
    finished_victims = [run.id for run in victims if run.status in TERMINAL]
    called = Counter(run for run, _ in pairs)
    attempts_seen: dict[str, int] = {}
    for c in attempts:
        run_id = c.headers.get("scheduler-run-id", "")
        if run_id in by_id:
            attempts_seen[run_id] = max(
                attempts_seen.get(run_id, 0), int(c.headers.get("scheduler-attempt", 0))
            )
    over = [
        f"{r.id}: attempt {r.attempt} of {r.max_attempts} (database)"
        for r in o.runs
        if r.attempt > r.max_attempts
    ]
    over += [
        f"{run_id}: attempt {seen} of {by_id[run_id].max_attempts} (receiver)"
        for run_id, seen in attempts_seen.items()
        if seen > by_id[run_id].max_attempts
    ]
    lag: dict[str, list[float]] = {}
    over_bound = []
    for run in victims:
        if run.lag is None:
            continue
        lag.setdefault(run.phase, []).append(run.lag)
        if run.lag > o.lag_bounds.get(run.phase, math.inf):
            over_bound.append(f"{run.id} ({run.phase}) {run.lag:.1f}s")
    behaviours: Counter[str] = Counter(c.behaviour for c in o.calls if c.behaviour)
    behaviours["hang abandoned"] = sum(1 for c in o.calls if c.behaviour == "hang" and c.abandoned)
    landed = {f.kind for f in o.faults if f.in_flight}
    return Report(
        outcome=o,
        statuses={
            tenant: dict(Counter(r.status for r in o.runs if r.tenant == tenant))
            for tenant in TENANTS
            if tenant != "limited" or limited
        },
        lost=[i for i in o.accepted if i not in by_id],
        unasked=[r.id for r in victims if r.id not in accepted],
        stuck=[r for r in o.runs if r.status not in TERMINAL],
        over_max_attempts=over,
        same_epoch_duplicates={pair: n for pair, n in pairs.items() if n > 1},
        redeliveries=len(pairs) - len(called),
        never_called=[r.id for r in victims if r.id not in called],
        final_epoch_not_called=[
            r.id for r in victims if r.status == "succeeded" and (r.id, r.epoch) not in pairs
        ],
        victims_not_succeeded=dict(Counter(r.status for r in victims if r.status != "succeeded")),
        lag={phase: sorted(values) for phase, values in lag.items()},
        over_lag_bound=over_bound,
        behaviours=behaviours,
        unlanded=[k for k in FAULT_KINDS if k not in landed],
        claims_never_delivered=sum(1 for f in o.faults for pair in f.held if pair not in pairs),
        callbacks_undelivered=[i for i in finished_victims if o.callbacks.get(i) != "delivered"],
        callbacks_never_received=[i for i in finished_victims if not callbacks_received[i]],
        callback_repeats=sum(n - 1 for n in callbacks_received.values()),
        limited_peaks=peaks(attempts) if o.limit else {},
        over_limit=over_limit(attempts, o.limit) if o.limit else [],
        limited_not_called=[r.id for r in limited if r.id not in called],
        paused_runs_called=sorted({i for i, _ in pairs} & set(o.paused_runs)),
    )
