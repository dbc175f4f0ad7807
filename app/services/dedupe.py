"""Unique and debounced runs (a job's `unique` and `debounce` rules, migration 0021): submitting the
runs of such jobs, each answered with the run its key names.

In one transaction: claim_dedupe_keys claims each run's key for an id it mints (the first run of a
key in the request claims it), insert_runs inserts the runs that got their key (and the request's
runs of other jobs), and the others are settled against the runs holding their keys. This
transaction holds those keys' row locks by then (the claim's ON CONFLICT took them), so the holders
read here cannot change before it commits, and what is decided is exact however many requests race
for a key, from however many API processes:
- unique within a window: the holder answers, whatever became of it (the claim took the key over if
  the window was over);
- unique while live: the holder answers while pending, dispatched or running; once it has ended, a
  new run takes the key over (claimed again with the holder `released`);
- debounce: the key's latest request folds into the holder while it is pending (debounce_runs); a
  holder a claim got first starts the next window: a new run takes the key over, and the key's later
  requests of the batch fold into that one.
Nothing that moves a run touches a key, so no transition ever waits for these locks."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from uuid import UUID

import asyncpg

from app.db import dedupe as dedupe_repo
from app.db import runs as run_repo
from app.db.dedupe import Fold
from app.domain import RunStatus
from app.services.run_requests import RunRequest, unknown_job

LIVE = frozenset((RunStatus.PENDING, RunStatus.DISPATCHED, RunStatus.RUNNING))

Group = tuple[str, str]  # (job, key)
# insert_runs for these requests (by index), with the claims of those of jobs with a rule (the id
# and key each was claimed with): the runs by index.
Insert = Callable[[list[int], dict[int, asyncpg.Record]], Awaitable[dict[int, asyncpg.Record]]]


class KeyLost(Exception):
    """A key or a job changed under this transaction where its locks should have held it (a job's
    rule changed between two statements, say): the transaction starts again."""


@dataclass
class Settled:
    """The requests' runs once every key is settled, by request index."""

    created: dict[int, asyncpg.Record]  # the runs they made (a debounced one as folded since)
    answered: dict[int, asyncpg.Record] = field(default_factory=dict)  # runs that exist already
    rules: dict[int, str] = field(default_factory=dict)  # answered index -> "unique" | "debounce"
    ruled: set[str] = field(default_factory=set)  # the requests' jobs that have a rule now


async def settle(
    conn: asyncpg.Connection,
    tenant_id: str,
    requests: Sequence[RunRequest],
    indices: list[int],
    insert: Insert,
) -> Settled:
    """Submits requests[i] for each i of `indices` (an unknown job: InvalidInput, naming the first)."""
    claims = await _claim(conn, tenant_id, requests, indices, {})
    missing = [i for i in indices if not claims[i]["job_exists"]]
    if missing:
        raise unknown_job(requests[missing[0]])
    inserting = [i for i in indices if claims[i]["key"] is None or claims[i]["claimed"]]
    created = await insert(inserting, claims) if inserting else {}
    if len(created) != len(inserting):
        raise KeyLost
    ruled = {requests[i].job for i in indices if claims[i]["key"] is not None}
    held = {i: claims[i]["key"] for i in indices if claims[i]["key"] is not None and not claims[i]["claimed"]}
    if not held:
        return Settled(created, ruled=ruled)
    groups: dict[Group, list[int]] = {}
    for i in sorted(held):
        groups.setdefault((requests[i].job, held[i]), []).append(i)
    holders = await dedupe_repo.holders(conn, tenant_id, list(groups))
    if len(holders) != len(groups):
        raise KeyLost
    runs = {row["id"]: row for row in created.values()}
    # A unique key's holder is read; a debounced one's comes back from its fold, if it folds.
    elsewhere = [h["run_id"] for h in holders.values() if not h["debounced"] and h["run_id"] not in runs]
    if elsewhere:
        runs |= {row["id"]: row for row in await run_repo.get_runs(conn, elsewhere)}
    debounced = [g for g in groups if holders[g]["debounced"]]
    folded = await _fold(
        conn, tenant_id, requests, [(groups[g][-1], holders[g]["run_id"], g) for g in debounced]
    )
    runs |= folded

    holder: dict[Group, UUID] = {}
    released: list[Group] = []
    for g in groups:
        key, run = holders[g], runs.get(holders[g]["run_id"])
        if key["debounced"]:
            answers = key["run_id"] in folded
        else:
            answers = run is not None and (key["window_ends_at"] is not None or run["status"] in LIVE)
        if answers:
            holder[g] = key["run_id"]
        else:
            released.append(g)
    if released:
        firsts = [groups[g][0] for g in released]
        claims = await _claim(conn, tenant_id, requests, firsts, {g: holders[g]["run_id"] for g in released})
        if not all(claims[i]["claimed"] for i in firsts):
            raise KeyLost
        made = await insert(firsts, claims)
        if len(made) != len(firsts):
            raise KeyLost
        for g in released:
            holder[g] = made[groups[g][0]]["id"]
            runs[holder[g]] = made[groups[g][0]]
            created[groups[g][0]] = made[groups[g][0]]
        refolds = [
            (groups[g][-1], holder[g], g) for g in released if holders[g]["debounced"] and len(groups[g]) > 1
        ]
        runs |= await _fold(conn, tenant_id, requests, refolds)

    settled = Settled({i: runs.get(row["id"], row) for i, row in created.items()}, ruled=ruled)
    for g, rows in groups.items():
        for i in rows:
            if i not in settled.created:
                settled.answered[i] = runs[holder[g]]
                settled.rules[i] = "debounce" if holders[g]["debounced"] else "unique"
    return settled


async def _claim(
    conn: asyncpg.Connection,
    tenant_id: str,
    requests: Sequence[RunRequest],
    indices: list[int],
    released: dict[Group, UUID],
) -> dict[int, asyncpg.Record]:
    """claim_dedupe_keys for requests[i] of `indices`: its row by request index."""
    rows = await dedupe_repo.claim_dedupe_keys(
        conn,
        tenant_id,
        jobs=[requests[i].job for i in indices],
        scheduled_ats=[requests[i].scheduled_at for i in indices],
        payloads=[requests[i].payload for i in indices],
        released=list(released.values()),
    )
    return {indices[row["ord"] - 1]: row for row in rows}


async def _fold(
    conn: asyncpg.Connection,
    tenant_id: str,
    requests: Sequence[RunRequest],
    folds: list[tuple[int, UUID, Group]],
) -> dict[UUID, asyncpg.Record]:
    """Folds request i into run_id for each (i, run_id, (job, key)); the runs folded, by id."""
    if not folds:
        return {}
    rows = await dedupe_repo.debounce_runs(
        conn,
        tenant_id,
        [
            Fold(run_id, job, key, requests[i].payload, requests[i].scheduled_at)
            for i, run_id, (job, key) in folds
        ],
    )
    return {row["id"]: row for row in rows}


class RuledJobs:
    """The jobs this process last saw with a unique or debounce rule, up to `size` of them: their
    submissions go straight to the transaction that claims keys instead of first trying the plain
    INSERT, which refuses them. A hint, never a decision: a job whose rule was removed since is
    submitted rightly that way too (and forgotten), and one given a rule since is refused by the
    INSERT as before."""

    def __init__(self, size: int = 10_000):
        self.size = size
        self._jobs: OrderedDict[tuple[str, str], None] = OrderedDict()

    def any_of(self, tenant_id: str, jobs: set[str]) -> bool:
        return any((tenant_id, job) in self._jobs for job in jobs)

    def saw(self, tenant_id: str, jobs: set[str], ruled: set[str]) -> None:
        for job in jobs:
            if job in ruled:
                self._jobs[(tenant_id, job)] = None
                self._jobs.move_to_end((tenant_id, job))
            else:
                self._jobs.pop((tenant_id, job), None)
        while len(self._jobs) > self.size:
            self._jobs.popitem(last=False)


RULED_JOBS = RuledJobs()
