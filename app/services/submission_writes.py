"""What one attempt at a submission writes, on one connection: the idempotency keys it looks up, the
tenant's quota it is admitted under, the runs it inserts (or a job's unique or debounce rule settles:
app.services.dedupe), the group it counts them into, the keys it records and the dependency edges
it links; and the run each request is answered with. The attempts, and what a failed one means, are
app.services.submission's."""

from __future__ import annotations

import functools
from uuid import UUID

import asyncpg

from app.db import dedupe as dedupe_repo
from app.db import runs as run_repo
from app.domain import MAX_TAGS, run_record
from app.errors import Conflict, InvalidInput, OverQuota
from app.services import audit as audit_log
from app.services import dedupe, dependencies, groups
from app.services.admission import Ticket
from app.services.callbacks import with_delivery_state
from app.services.dedupe import RULED_JOBS
from app.services.groups import GroupPlan
from app.services.run_requests import (
    IDEMPOTENCY_GRACE_SECONDS,
    IDEMPOTENCY_IN_FLIGHT_WAIT_MS,
    RunRequest,
    Submitted,
    creating,
    first_uses,
)


class LostRace(Exception):
    """A concurrent request committed the same idempotency key first; the transaction is retried."""


class KeyInFlight(Exception):
    """Another request holds the same idempotency key, uncommitted, past IDEMPOTENCY_IN_FLIGHT_WAIT."""


class _NeedsTransaction(Exception):
    """The submission cannot be settled in one statement: it starts again in a transaction."""

    def __init__(self, ruled: bool = False):
        self.ruled = ruled  # a run's job has a unique or debounce rule


async def write(
    conn: asyncpg.Connection,
    ticket: Ticket,
    tenant_id: str,
    requests: list[RunRequest],
    traceparent: str | None,
    notify: bool,
    in_transaction: bool,
    ruled: bool,
    group: GroupPlan | None = None,
    audit: audit_log.AuditContext | None = None,
) -> list[Submitted]:
    """One INSERT (its NOTIFY included) is atomic on its own: a plain submission makes no BEGIN/COMMIT
    round trips. One that needs more statements runs in a transaction: with an idempotency key, or
    with a run of a job with a unique or debounce rule (which that INSERT refused, writing nothing;
    `ruled`: one is known to, so it is not tried), or with its group or its audit event (`audit`)."""
    if not in_transaction and group is None and audit is None:
        try:
            return await _write(conn, ticket, tenant_id, requests, traceparent, notify, single=True)
        except _NeedsTransaction as exc:
            ticket.release()  # admitted again in the transaction
            ruled = exc.ruled
    async with conn.transaction():
        submitted = await _write(
            conn, ticket, tenant_id, requests, traceparent, notify, single=False, ruled=ruled, group=group
        )
        if audit is not None:
            await audit_log.triggered(conn, audit, tenant_id, [(s.run, s.created) for s in submitted])
        return submitted


async def _write(
    conn: asyncpg.Connection,
    ticket: Ticket,
    tenant_id: str,
    requests: list[RunRequest],
    traceparent: str | None,
    notify: bool,
    single: bool,
    ruled: bool = False,
    group: GroupPlan | None = None,
) -> list[Submitted]:
    """`single`: outside a transaction, so it must take one statement or raise _NeedsTransaction;
    `ruled`: a job of the runs is known to have a unique or debounce rule."""
    parents = dependencies.resolve(requests)
    hashes = [r.body_hash() for r in requests]
    first_with_key = first_uses(requests, hashes)
    earlier_uses = (
        await run_repo.find_idempotency_keys(conn, tenant_id, list(first_with_key)) if first_with_key else []
    )
    fresh = creating(requests, hashes, first_with_key, {row["key"]: row["body_hash"] for row in earlier_uses})
    replayed: dict[str, UUID] = {row["key"]: row["run_id"] for row in earlier_uses}  # key -> earlier run
    refused = (
        await _admit(conn, ticket, tenant_id, [requests[i].job for i in fresh], single) if fresh else None
    )

    async def insert(indices: list[int], claims: dict[int, asyncpg.Record]) -> dict[int, asyncpg.Record]:
        """insert_runs for requests[i] of `indices`, those of jobs with a rule with the id, time and
        key claim_dedupe_keys claimed for them (`claims` by index; empty on the default path)."""
        keyed = {i: claims[i] for i in indices if claims[i]["key"] is not None} if claims else {}
        rows = await run_repo.insert_runs(
            conn,
            tenant_id,
            jobs=[requests[i].job for i in indices],
            scheduled_ats=[
                keyed[i]["scheduled_at"] if i in keyed else requests[i].scheduled_at for i in indices
            ],
            payloads=[requests[i].payload for i in indices],
            idempotency_keys=[requests[i].idempotency_key for i in indices],
            priorities=[requests[i].priority for i in indices],
            callbacks=[requests[i].callback for i in indices],
            expires_ats=[requests[i].expires_at for i in indices],
            tags=[requests[i].tags for i in indices],
            metadatas=[requests[i].metadata for i in indices],
            traceparent=traceparent,
            notify=notify,
            run_ids=[keyed[i]["id"] if i in keyed else None for i in indices] if keyed else None,
            dedupe_keys=[keyed[i]["key"] if i in keyed else None for i in indices] if keyed else None,
            group_id=group.id if group is not None else None,
        )
        if len(rows) != len(indices):
            refusal = await _too_many_tags(conn, tenant_id, [requests[i] for i in indices])
            if refusal is not None:
                raise refusal
        return {indices[row["ord"] - 1]: row for row in rows}

    created = {} if ruled or not fresh else await insert(fresh, {})
    if len(created) == len(fresh):
        settled = dedupe.Settled(created)
    elif single:
        # Nothing was written: a run names a job with a unique or debounce rule, whose keys are
        # claimed first, in a transaction (or a job the tenant does not have, found there too).
        raise _NeedsTransaction(ruled=True)
    else:
        settled = await dedupe.settle(conn, tenant_id, requests, fresh, insert)
        RULED_JOBS.saw(tenant_id, {requests[i].job for i in fresh}, settled.ruled)
    if refused is not None and settled.created:
        raise refused  # its runs are rolled back with the transaction
    if group is not None and settled.created:
        await groups.record(conn, tenant_id, group, len(settled.created))
    answered = settled.created | settled.answered  # the run each fresh request is answered with

    keyed = [i for i in fresh if requests[i].idempotency_key is not None]
    if keyed:
        try:
            won = await run_repo.insert_idempotency_keys(
                conn,
                tenant_id,
                keys=[requests[i].idempotency_key for i in keyed],  # type: ignore[misc]
                run_ids=[answered[i]["id"] for i in keyed],
                run_scheduled_ats=[answered[i]["scheduled_at"] for i in keyed],
                body_hashes=[hashes[i] for i in keyed],
                grace_seconds=IDEMPOTENCY_GRACE_SECONDS,
                in_flight_wait_ms=IDEMPOTENCY_IN_FLIGHT_WAIT_MS,
            )
        except asyncpg.LockNotAvailableError:
            # The insert waited that long on another request's uncommitted key. Only this wait is
            # the key's: the bound holds to the transaction's end, and COMMIT may wait on a lock
            # too — NOTIFY's queue lock, held by commits waiting for a synchronous standby (none
            # attached yet after a failover). That one is the database unavailable for a moment:
            # it goes on as a LockNotAvailableError, a 503 (app.services.availability).
            raise KeyInFlight from None
        if len(won) != len(keyed):
            raise LostRace
        for i in keyed:
            replayed[requests[i].idempotency_key] = answered[i]["id"]  # type: ignore[index]

    created_rows = dict(settled.created)
    if any(parents):  # the created runs as their edges leave them (held, or cancelled)
        linked = dependencies.link(conn, tenant_id, requests, parents, answered, replayed, created_rows)
        created_rows = await linked

    earlier_ids = [
        replayed[r.idempotency_key]
        for i, r in enumerate(requests)
        if i not in answered and r.idempotency_key is not None
    ]
    earlier = {row["id"]: row for row in await run_repo.get_runs(conn, earlier_ids)} if earlier_ids else {}
    out: list[Submitted] = []
    for i, r in enumerate(requests):
        if i in created_rows:
            out.append(Submitted(run_record(created_rows[i]), True))
        elif i in settled.answered:
            out.append(Submitted(run_record(settled.answered[i]), False, settled.rules[i]))
        else:
            assert r.idempotency_key is not None
            run_id = replayed[r.idempotency_key]
            row = earlier.get(run_id)
            if row is None:  # its day was dropped a moment ago; the key goes in the same maintenance pass
                raise Conflict(
                    "idempotency key refers to a run that no longer exists", field=f"{r.field}idempotency_key"
                )
            out.append(Submitted(run_record(row), False))
    await with_delivery_state(conn, [s.run for s in out if not s.created])
    return out


async def _too_many_tags(
    conn: asyncpg.Connection, tenant_id: str, requests: list[RunRequest]
) -> InvalidInput | None:
    """When insert_runs wrote nothing: the first run whose tags make more than MAX_TAGS beside its
    job's default tags, if one does (else a job of the runs is unknown or has a rule, which the
    caller finds out). Looked up only when a run brings tags of its own."""
    tagged = [r for r in requests if r.tags]
    if not tagged:
        return None
    job_tags = await run_repo.job_tags(conn, tenant_id, [r.job for r in tagged])
    for r in tagged:
        together = len(dict.fromkeys([*job_tags.get(r.job, []), *(r.tags or [])]))
        if together > MAX_TAGS:
            return InvalidInput(
                f"tags: with job {r.job!r}'s {len(job_tags[r.job])} default tags, this run would carry "
                f"{together}; at most {MAX_TAGS}",
                field=f"{r.field}tags",
            )
    return None


async def _admit(
    conn: asyncpg.Connection, ticket: Ticket, tenant_id: str, jobs: list[str], single: bool
) -> OverQuota | None:
    """Admits the runs, or raises OverQuota — unless one of their jobs has a unique or debounce
    rule: a duplicate creates nothing, so it is answered as a replay is, quota or not. Then the
    refusal is returned, to be raised if the submission creates a run after all (in a transaction,
    which that rolls back)."""
    try:
        await ticket.admit(functools.partial(run_repo.count_pending_runs, conn, tenant_id), len(jobs))
    except OverQuota as refusal:
        if not await dedupe_repo.jobs_with_dedupe_rules(conn, tenant_id, list(set(jobs))):
            raise
        if single:
            raise _NeedsTransaction from None
        return refusal
    return None
