"""Dependencies under faults, the workload: through the fault window the victim submits small graphs,
one batch each, its steps naming their parents by `ref` — chains two deep, a diamond, a parent of a
job whose every attempt fails with dependents cancelled (transitively) or run anyway
(`on_parent_failure: "run"`), and steps depending by id on a run of an earlier graph, which may be
in flight, just ended or cancelled. Each step's idempotency key is its own, so a batch cut off by a
fault and sent again to another API replays the same runs. tests/faults/dependencies.py checks what
became of them."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from tests.faults.victim import TENANT, Victim

STEP_JOB = "step"  # a webhook answered 200 after the payload's sleep, with generous attempts
DOOMED_JOB = "doomed"  # a webhook answered 500 every time: its runs end failed
JOBS = (STEP_JOB, DOOMED_JOB)
MAX_STEP_ATTEMPTS = 25
DOOMED_ATTEMPTS = 2
EARLIER = "@"  # in a shape, a parent that is a run of an earlier graph, named by its id
RECENT = 12  # a step naming an earlier graph's run picks among the newest this many
GRAPH_EVERY = 1.0  # seconds between one sender's graphs

# Each shape: its steps as (ref, job, parents, on_parent_failure); a parent is an earlier step's ref,
# or EARLIER.
Shape = tuple[tuple[str, str, tuple[str, ...], str], ...]
SHAPES: dict[str, Shape] = {
    "chain": (
        ("a", STEP_JOB, (), "cancel"),
        ("b", STEP_JOB, ("a",), "cancel"),
        ("c", STEP_JOB, ("b",), "cancel"),
    ),
    "diamond": (
        ("a", STEP_JOB, (), "cancel"),
        ("l", STEP_JOB, ("a",), "cancel"),
        ("r", STEP_JOB, ("a",), "cancel"),
        ("d", STEP_JOB, ("l", "r"), "cancel"),
    ),
    # x fails: y and, through y, z are cancelled; w runs anyway, and u after w; v after both a and x.
    "doomed": (
        ("x", DOOMED_JOB, (), "cancel"),
        ("a", STEP_JOB, (), "cancel"),
        ("y", STEP_JOB, ("x",), "cancel"),
        ("z", STEP_JOB, ("y",), "cancel"),
        ("w", STEP_JOB, ("x",), "run"),
        ("u", STEP_JOB, ("w",), "cancel"),
        ("v", STEP_JOB, ("a", "x"), "run"),
    ),
    "late": (
        ("a", STEP_JOB, (EARLIER,), "cancel"),
        ("b", STEP_JOB, ("a", EARLIER), "run"),
    ),
}


def jobs(receiver_url: str) -> dict[str, dict[str, Any]]:
    """The graphs' jobs, by name: webhooks to the receiver, their answers scripted by the payload."""
    target = {"type": "http", "url": receiver_url}
    common = {"target": target, "backoff_seconds": 0.2, "timeout_seconds": 10}
    return {
        STEP_JOB: {**common, "max_attempts": MAX_STEP_ATTEMPTS},
        DOOMED_JOB: {**common, "max_attempts": DOOMED_ATTEMPTS},
    }


class Graphs:
    """The victim's graphs: what the API accepted, run by run, with each run's parents' ids."""

    def __init__(self, victim: Victim, rng: random.Random):
        self.victim = victim
        self.rng = rng
        self.accepted: dict[str, tuple[str, ...]] = {}  # run id -> its parents' ids, as submitted
        self.shapes = itertools.cycle(SHAPES)
        self.count = itertools.count()

    def items(self, graph: int, shape: Shape) -> tuple[list[dict[str, Any]], list[tuple[str, ...]]]:
        """The batch's items, and each one's parents as refs of this batch or ids of earlier runs."""
        recent = list(self.accepted)[-RECENT:]
        items, parents = [], []
        for ref, job, names, on_parent_failure in shape:
            named = tuple(
                self.rng.choice(recent) if n == EARLIER else n for n in names if n != EARLIER or recent
            )
            payload: dict[str, Any] = {"sleep": round(self.rng.uniform(0.02, 0.3), 3)}
            if job == DOOMED_JOB:
                payload["statuses"] = [500]
            items.append(
                {
                    "job": job,
                    "ref": ref,
                    "depends_on": list(dict.fromkeys(named)),
                    "on_parent_failure": on_parent_failure,
                    "payload": payload,
                    "idempotency_key": f"graph-{graph}-{ref}",
                }
            )
            parents.append(tuple(dict.fromkeys(named)))
        return items, parents

    async def submit(self, ports: Callable[[], list[int]]) -> None:
        """One graph, in one batch, to a live API (tried again elsewhere until one accepts it)."""
        graph = next(self.count)
        items, parents = self.items(graph, SHAPES[next(self.shapes)])
        r = await self.victim.post(ports, f"/tenants/{TENANT}/runs/batch", {"runs": items}, f"graph {graph}")
        if r is None:
            return
        ids = [run["id"] for run in r.json()["runs"]]
        by_ref = {item["ref"]: run_id for item, run_id in zip(items, ids, strict=True)}
        for run_id, named in zip(ids, parents, strict=True):
            self.accepted[run_id] = tuple(by_ref.get(n, n) for n in named)

    async def senders(self, ports: Callable[[], list[int]], stop: asyncio.Event, n: int = 1) -> None:
        """`n` clients submitting a graph every GRAPH_EVERY seconds until `stop`."""

        async def sender() -> None:
            while not stop.is_set():
                await self.submit(ports)
                await asyncio.sleep(GRAPH_EVERY)

        await asyncio.gather(*(sender() for _ in range(n)))


async def parents_in_flight(fetch: Callable[..., Awaitable[Sequence[Any]]]) -> int:
    """The graphs' runs that have dependents and are due, claimed or running: a fault striking while
    there are some strikes parents on their way to finishing (an engine's kill, its claims of them
    or of the runs queued before them)."""
    rows = await fetch(
        "SELECT count(*) AS n FROM job_runs WHERE tenant_id = $1 AND job = ANY($2::text[])"
        " AND dependents IS NOT NULL AND (status IN ('dispatched', 'running')"
        " OR (status = 'pending' AND held IS NULL AND due_at <= now()))",
        TENANT,
        list(JOBS),
    )
    return int(rows[0]["n"])
