"""Submitting runs: one or a batch, all-or-nothing, idempotent, under the tenant's backlog quota."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg
import orjson

from app.db import runs as run_repo
from app.domain import MAX_TAGS, OnPending, RunRecord, no_hint, run_record
from app.errors import AppError, Conflict, InvalidInput
from app.services.admission import AdmissionControl, Ticket
from app.services.callbacks import with_delivery_state
from app.services.wakeups import WakeUps
from app.telemetry.tracing import submitter_traceparent

# A key holds until its run is terminal and this long after; it goes with its run's day partition
# at the latest (README: "Idempotency keys"). Never less than this after the submission either.
IDEMPOTENCY_GRACE_SECONDS = 24 * 3600
# How long a request waits for another one holding the same key, uncommitted, before answering 409.
IDEMPOTENCY_IN_FLIGHT_WAIT_MS = 100


@dataclass(frozen=True)
class RunRequest:
    job: str
    scheduled_at: datetime | None
    payload: Any | None  # None: the job's default payload
    idempotency_key: str | None
    field: str  # where this request sits in the body, for error messages ("" or "runs[3].")
    priority: int | None = None  # None: the job's priority
    callback: dict[str, Any] | None = None  # validated (app.services.callbacks); None: the job's
    tags: list[str] | None = None  # deduplicated; added to the job's
    metadata: dict[str, Any] | None = None  # checked (app.services.validation.check_metadata)

    def body_hash(self) -> str:
        body: dict[str, Any] = {
            "job": self.job,
            "scheduled_at": self.scheduled_at.isoformat() if self.scheduled_at else None,
            "payload": self.payload,
        }
        if self.priority is not None:  # only when sent: keys stored before priority existed still match
            body["priority"] = self.priority
        if self.callback is not None:  # only then: keys stored before callbacks existed still match
            body["callback"] = self.callback
        if self.tags is not None:  # likewise for tags and metadata
            body["tags"] = self.tags
        if self.metadata is not None:
            body["metadata"] = self.metadata
        return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True)
class Submitted:
    run: RunRecord
    created: bool  # False: an idempotent replay of an earlier request


class _LostRace(Exception):
    """A concurrent request committed the same idempotency key first; the transaction is retried."""


class _KeyInFlight(Exception):
    """Another request holds the same idempotency key, uncommitted, past IDEMPOTENCY_IN_FLIGHT_WAIT."""


async def submit(
    pool: asyncpg.Pool,
    admission: AdmissionControl,
    tenant_id: str,
    requests: list[RunRequest],
    traceparent: str | None,
    wakeups: WakeUps | None = None,
    on_pending: OnPending = no_hint,
) -> list[Submitted]:
    """Runs the requests in one transaction; once committed, the created runs are handed to
    `on_pending` (the hot index's hint). `traceparent` is what the caller sent, if anything."""
    notify = wakeups.due(r.scheduled_at for r in requests) if wakeups is not None else True
    traceparent = submitter_traceparent(traceparent)
    keyed = any(r.idempotency_key is not None for r in requests)
    for attempt in range(3):
        ticket = admission.ticket(tenant_id)
        try:
            async with pool.acquire() as conn:
                if not keyed:
                    # One INSERT (its NOTIFY included) is atomic on its own: no BEGIN/COMMIT round trips.
                    submitted = await _submit(conn, ticket, tenant_id, requests, traceparent, notify)
                else:
                    async with conn.transaction():
                        submitted = await _submit(conn, ticket, tenant_id, requests, traceparent, notify)
            ticket.committed()
            await on_pending([s.run for s in submitted if s.created])
            return submitted
        except asyncpg.CheckViolationError as exc:
            # A run for a day whose partition is being attached this instant routed to DEFAULT on the
            # old partition list and was refused (nothing was written); planned again, it finds the day.
            if attempt == 2 or "partition constraint" not in str(exc):
                raise
        except _KeyInFlight:
            # The IETF Idempotency-Key draft's "request in progress".
            raise Conflict(
                "a request with this idempotency key is still in flight; retry once it has finished",
                field="idempotency_key",
            ) from None
        except _LostRace:
            if attempt == 2:
                raise Conflict(
                    "idempotency key is being used concurrently; retry", field="idempotency_key"
                ) from None
        finally:
            ticket.release()  # a no-op once committed
    raise AssertionError("unreachable")


def first_uses(requests: list[RunRequest], hashes: list[str]) -> dict[str, int]:
    """The index of the first request carrying each idempotency key. A key repeated within the
    request with another body is refused (422, naming the later one)."""
    first_with_key: dict[str, int] = {}
    for i, r in enumerate(requests):
        if r.idempotency_key is None:
            continue
        j = first_with_key.setdefault(r.idempotency_key, i)
        if j != i and hashes[j] != hashes[i]:
            raise InvalidInput(
                "idempotency key repeated with a different body", field=f"{r.field}idempotency_key"
            )
    return first_with_key


def creating(
    requests: list[RunRequest], hashes: list[str], first_with_key: dict[str, int], earlier: dict[str, str]
) -> list[int]:
    """Which requests create a run: those with no key, and the first use of a key no earlier request
    used (`earlier`: body hash by key already used). The rest replay a run. A key used earlier with
    another body is refused."""
    for key, body_hash in earlier.items():
        i = first_with_key[key]
        if body_hash != hashes[i]:
            # 422, as the IETF Idempotency-Key draft has it: the request itself is wrong, and
            # resending it can never succeed.
            raise InvalidInput(
                "idempotency key was already used with a different body",
                field=f"{requests[i].field}idempotency_key",
            )
    return [
        i
        for i, r in enumerate(requests)
        if r.idempotency_key is None
        or (r.idempotency_key not in earlier and first_with_key[r.idempotency_key] == i)
    ]


async def _submit(
    conn: asyncpg.Connection,
    ticket: Ticket,
    tenant_id: str,
    requests: list[RunRequest],
    traceparent: str | None,
    notify: bool,
) -> list[Submitted]:
    hashes = [r.body_hash() for r in requests]
    first_with_key = first_uses(requests, hashes)
    earlier_uses = (
        await run_repo.find_idempotency_keys(conn, tenant_id, list(first_with_key)) if first_with_key else []
    )
    fresh = creating(requests, hashes, first_with_key, {row["key"]: row["body_hash"] for row in earlier_uses})
    replayed: dict[str, UUID] = {row["key"]: row["run_id"] for row in earlier_uses}  # key -> earlier run
    if fresh:
        await ticket.admit(functools.partial(run_repo.count_pending_runs, conn, tenant_id), len(fresh))
    inserted = await run_repo.insert_runs(
        conn,
        tenant_id,
        jobs=[requests[i].job for i in fresh],
        scheduled_ats=[requests[i].scheduled_at for i in fresh],
        payloads=[requests[i].payload for i in fresh],
        idempotency_keys=[requests[i].idempotency_key for i in fresh],
        priorities=[requests[i].priority for i in fresh],
        callbacks=[requests[i].callback for i in fresh],
        tags=[requests[i].tags for i in fresh],
        metadatas=[requests[i].metadata for i in fresh],
        traceparent=traceparent,
        notify=notify,
    )
    if len(inserted) != len(fresh):
        raise await _refusal(conn, tenant_id, [requests[i] for i in fresh])
    created: dict[int, asyncpg.Record] = {fresh[row["ord"] - 1]: row for row in inserted}

    keyed = [i for i in fresh if requests[i].idempotency_key is not None]
    if keyed:
        try:
            won = await run_repo.insert_idempotency_keys(
                conn,
                tenant_id,
                keys=[requests[i].idempotency_key for i in keyed],  # type: ignore[misc]
                run_ids=[created[i]["id"] for i in keyed],
                run_scheduled_ats=[created[i]["scheduled_at"] for i in keyed],
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
            raise _KeyInFlight from None
        if len(won) != len(keyed):
            raise _LostRace
        for i in keyed:
            replayed[requests[i].idempotency_key] = created[i]["id"]  # type: ignore[index]

    earlier_ids = [
        replayed[r.idempotency_key]
        for i, r in enumerate(requests)
        if i not in created and r.idempotency_key is not None
    ]
    earlier = {row["id"]: row for row in await run_repo.get_runs(conn, earlier_ids)} if earlier_ids else {}
    out: list[Submitted] = []
    for i, r in enumerate(requests):
        if i in created:
            out.append(Submitted(run_record(created[i]), True))
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


async def _refusal(conn: asyncpg.Connection, tenant_id: str, requests: list[RunRequest]) -> AppError:
    """Why insert_runs wrote nothing: the first run that names a job this tenant does not have, or
    brings tags that make more than MAX_TAGS beside its job's."""
    job_tags = await run_repo.job_tags(conn, tenant_id, [r.job for r in requests])
    for r in requests:
        if r.job not in job_tags:
            return InvalidInput(f"job {r.job!r} does not exist", field=f"{r.field}job")
        together = len(dict.fromkeys([*job_tags[r.job], *(r.tags or [])]))
        if together > MAX_TAGS:
            return InvalidInput(
                f"tags: with job {r.job!r}'s {len(job_tags[r.job])} default tags, this run would carry "
                f"{together}; at most {MAX_TAGS}",
                field=f"{r.field}tags",
            )
    # A job was created, changed or deleted between the insert and this look: try again.
    return Conflict("a job of these runs changed while they were submitted; retry", field="job")


async def count_pending(pool: asyncpg.Pool, tenant_id: str, limit: int) -> int:
    """The tenant's pending runs, up to `limit`: the count admission takes (AdmissionControl)."""
    async with pool.acquire() as conn:
        return await run_repo.count_pending_runs(conn, tenant_id, limit)
