"""Unique and debounced runs (a job's `unique` and `debounce` rules, migration 0020): answering the
submissions whose key another run holds.

insert_runs claims each run's key in the statement that inserts the run, and hands back the runs that
did not get theirs. By then this transaction holds their keys' row locks (that ON CONFLICT took
them), so the holders read here cannot change before it commits, and what is decided here is exact
however many requests race for a key, from however many API processes:
- unique within a window: the holder answers, whatever became of it (insert_runs took the key over
  if the window was over);
- unique while live: the holder answers while pending, dispatched or running; once it has ended,
  a new run takes the key over (insert_runs with the holder `released`);
- debounce: the latest request of the key folds into the holder while it is pending (debounce_runs);
  a holder a claim got first starts the next window: a new run takes the key over, and the key's
  later requests of the batch fold into that one.
A key repeated within one batch is held by the batch's first run of it, which then answers the
later items as above. Nothing that moves a run touches a key, so no transition waits for these
locks, and none of them can deadlock with a submission."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from uuid import UUID

import asyncpg

from app.db import dedupe as dedupe_repo
from app.db import runs as run_repo
from app.db.dedupe import Fold
from app.domain import RunStatus
from app.services.run_requests import RunRequest

# What insert_runs fails with when it must write all or nothing and found a key held (migration 0020).
CONFLICT_SQLSTATE = "SD409"
LIVE = frozenset((RunStatus.PENDING, RunStatus.DISPATCHED, RunStatus.RUNNING))

Group = tuple[str, str]  # (job, key)
# insert_runs for these requests (by index), the keys of these runs released: the rows by index.
Insert = Callable[[list[int], list[UUID]], Awaitable[dict[int, asyncpg.Record]]]


def is_conflict(exc: BaseException) -> bool:
    """insert_runs refused to write part of a submission: some key is held."""
    return isinstance(exc, asyncpg.PostgresError) and getattr(exc, "sqlstate", None) == CONFLICT_SQLSTATE


class KeyLost(Exception):
    """A key whose row lock this transaction holds was not where it was: the transaction starts again."""


@dataclass
class Settled:
    """The requests' runs once every key is settled, by request index."""

    created: dict[int, asyncpg.Record]  # the runs they made (a debounced one as folded since)
    answered: dict[int, asyncpg.Record] = field(default_factory=dict)  # runs that exist already
    rules: dict[int, str] = field(default_factory=dict)  # answered index -> "unique" | "debounce"


async def settle(
    conn: asyncpg.Connection,
    tenant_id: str,
    requests: Sequence[RunRequest],
    created: dict[int, asyncpg.Record],
    held: dict[int, str],
    insert: Insert,
) -> Settled:
    """`created`: the runs insert_runs made; `held`: request index -> its key, for the requests it
    made none for because another run holds their key."""
    groups: dict[Group, list[int]] = {}
    for i in sorted(held):
        groups.setdefault((requests[i].job, held[i]), []).append(i)
    holders = await dedupe_repo.holders(conn, tenant_id, list(groups))
    if len(holders) != len(groups):
        raise KeyLost
    runs = {row["id"]: row for row in created.values()}
    elsewhere = [h["run_id"] for h in holders.values() if h["run_id"] not in runs]
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
        made = await insert(firsts, [holders[g]["run_id"] for g in released])
        if any(made.get(i) is None or made[i]["id"] is None for i in firsts):
            raise KeyLost
        for g in released:
            holder[g] = made[groups[g][0]]["id"]
            runs[holder[g]] = made[groups[g][0]]
            created[groups[g][0]] = made[groups[g][0]]
        refolds = [
            (groups[g][-1], holder[g], g) for g in released if holders[g]["debounced"] and len(groups[g]) > 1
        ]
        runs |= await _fold(conn, tenant_id, requests, refolds)

    settled = Settled({i: runs.get(row["id"], row) for i, row in created.items()})
    for g, rows in groups.items():
        for i in rows:
            if i not in settled.created:
                settled.answered[i] = runs[holder[g]]
                settled.rules[i] = "debounce" if holders[g]["debounced"] else "unique"
    return settled


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
