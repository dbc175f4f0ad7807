"""Run dependencies: what a submission's `depends_on`, `ref`, `on_parent_failure` and `pass_results`
mean, checked before anything is written, and the edges written in the submission's transaction.

A run depends only on runs that exist or come earlier in the same batch, so no cycle can be written.
The release and the cancel cascade happen in Postgres, in the statement that ends a parent
(migration 0023)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

import asyncpg

from app.db import dependencies as repo
from app.db import runs as run_repo
from app.domain import RunRecord, RunStatus
from app.errors import InvalidInput

if TYPE_CHECKING:
    from app.services.run_requests import RunRequest

# The most parents one run names.
MAX_PARENTS = 100
# How a parent's end settles its dependents: succeeded always; any other end only with "run".
ON_PARENT_FAILURE = ("cancel", "run")
_ENDED_BADLY = (RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.EXPIRED)


@dataclass(frozen=True)
class Dependencies:
    """A request's dependency fields, as sent (bounded by the API's schema)."""

    ref: str | None = None
    depends_on: tuple[str, ...] = ()
    on_parent_failure: str = "cancel"
    pass_results: bool = False

    def hashed(self) -> dict[str, Any]:
        """What an idempotency key is bound to of these (nothing when they are the defaults)."""
        if self == NO_DEPENDENCIES:
            return {}
        return {
            "ref": self.ref,
            "depends_on": list(self.depends_on),
            "on_parent_failure": self.on_parent_failure,
            "pass_results": self.pass_results,
        }


NO_DEPENDENCIES = Dependencies()


@dataclass(frozen=True)
class Parent:
    """One entry of a request's depends_on: an earlier item of the batch, or a run id."""

    name: str  # as sent: the key its result is passed under
    item: int | None  # the earlier item's index, or None for a run id
    run_id: UUID | None


def resolve(requests: list[RunRequest]) -> list[list[Parent]]:
    """Each request's parents, or 422 naming the first entry that is neither a ref of an earlier item
    nor a run id (a later item's ref included: that is how a cycle is refused), nothing written."""
    refs: dict[str, int] = {}
    later = {r.dependencies.ref: i for i, r in enumerate(requests) if r.dependencies.ref is not None}
    out: list[list[Parent]] = []
    for i, r in enumerate(requests):
        deps = r.dependencies
        if deps.ref is not None:
            if deps.ref in refs:
                raise InvalidInput(f"ref {deps.ref!r} is used by an earlier item", field=f"{r.field}ref")
            if _uuid(deps.ref) is not None:
                raise InvalidInput("a ref must not be a run id", field=f"{r.field}ref")
        if len(deps.depends_on) > MAX_PARENTS:
            raise InvalidInput(f"at most {MAX_PARENTS} parents", field=f"{r.field}depends_on")
        parents: list[Parent] = []
        seen: set[str] = set()
        for j, name in enumerate(deps.depends_on):
            field = f"{r.field}depends_on[{j}]"
            if name in seen:
                raise InvalidInput(f"{name!r} is named twice", field=field)
            seen.add(name)
            if name in refs:
                parents.append(Parent(name, refs[name], None))
            elif name in later:
                raise InvalidInput(
                    f"{name!r} is the ref of this or a later item: a run depends only on runs that exist "
                    "or come earlier in the batch",
                    field=field,
                )
            elif (run_id := _uuid(name)) is not None:
                parents.append(Parent(name, None, run_id))
            else:
                raise InvalidInput(f"{name!r} is neither a ref of an earlier item nor a run id", field=field)
        if deps.ref is not None:
            refs[deps.ref] = i
        out.append(parents)
    return out


def _uuid(text: str) -> UUID | None:
    try:
        return UUID(text)
    except ValueError:
        return None


async def link(
    conn: asyncpg.Connection,
    tenant_id: str,
    requests: list[RunRequest],
    parents: list[list[Parent]],
    answered: dict[int, asyncpg.Record],
    replayed: dict[str, UUID],
    created: dict[int, asyncpg.Record],
) -> dict[int, asyncpg.Record]:
    """Writes the edges of the created runs (`created`, by index into `requests`) that name parents,
    in the caller's transaction: the parents locked and counted, each child held while a parent has
    not settled it, one whose parent already ended badly cancelled (with on_parent_failure
    "cancel"). A request's parent item is the run it was answered with (`answered`, or the run its
    idempotency key replays: `replayed`). Unknown parents, and other tenants' runs, are 422 naming
    the entry (the transaction then writes nothing). Answers the created runs as they are now."""
    run_ids = {
        i: answered[i]["id"] if i in answered else replayed[r.idempotency_key]  # type: ignore[index]
        for i, r in enumerate(requests)
    }
    if await _link(conn, tenant_id, requests, parents, run_ids, created):
        rows = {row["id"]: row for row in await run_repo.get_runs(conn, [r["id"] for r in created.values()])}
        created = {i: rows[row["id"]] for i, row in created.items()}
    return created


async def _link(
    conn: asyncpg.Connection,
    tenant_id: str,
    requests: list[RunRequest],
    parents: list[list[Parent]],
    run_ids: dict[int, UUID],
    created: dict[int, asyncpg.Record],
) -> bool:
    """link's writes; True when it wrote anything."""
    children = [i for i in sorted(created) if parents[i]]
    if not children:
        return False
    wanted = [run_ids[p.item] if p.item is not None else p.run_id for i in children for p in parents[i]]
    found = {row["id"]: row for row in await repo.lock_parents(conn, tenant_id, wanted)}  # type: ignore[arg-type]
    edges = []
    holds = []
    orphans = []
    for i in children:
        child_id, child_at = created[i]["id"], created[i]["scheduled_at"]
        deps = requests[i].dependencies
        waiting = 0
        reason = None
        ids: list[UUID] = []
        for j, p in enumerate(parents[i]):
            parent_id = run_ids[p.item] if p.item is not None else p.run_id
            row = found.get(parent_id)  # type: ignore[arg-type]
            if row is None:
                raise InvalidInput(
                    f"run {p.name} does not exist", field=f"{requests[i].field}depends_on[{j}]"
                )
            status = row["status"]
            ids.append(row["id"])
            ended_badly = status in _ENDED_BADLY
            settled = status == RunStatus.SUCCEEDED or (deps.on_parent_failure == "run" and ended_badly)
            if not settled:
                waiting += 1
                if ended_badly and reason is None:
                    reason = f"parent {parent_id} ended {status}"
            mode = deps.on_parent_failure
            edges.append((child_id, child_at, row["id"], row["scheduled_at"], p.name, mode, settled))
        holds.append((child_id, child_at, waiting, deps.pass_results, ids))
        if reason is not None:
            orphans.append((child_id, child_at, reason))
    await repo.insert_dependencies(conn, tenant_id, edges)
    await repo.hold_dependents(conn, holds)
    if orphans:
        await repo.cancel_orphans(conn, orphans)
    return True


# The most dependents a run's page lists (its count says how many there are).
LISTED_DEPENDENTS = 50


async def dependents(pool: asyncpg.Pool, run: RunRecord) -> list[UUID]:
    """The first LISTED_DEPENDENTS runs depending on `run` (a run the caller may read: its
    dependents are its tenant's, as every edge joins runs of one tenant)."""
    if not run["dependents"]:
        return []
    async with pool.acquire() as conn:
        return [row["id"] for row in await repo.dependents_of(conn, run["id"], LISTED_DEPENDENTS)]
