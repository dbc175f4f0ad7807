"""Submitting runs: one or a batch, all-or-nothing, idempotent, under the tenant's backlog quota."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg
import orjson

from app.db import runs as run_repo
from app.domain import OnPending, RunRecord, no_hint, run_record
from app.errors import Conflict, InvalidInput, OverQuota
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

    def body_hash(self) -> str:
        body = {
            "job": self.job,
            "scheduled_at": self.scheduled_at.isoformat() if self.scheduled_at else None,
            "payload": self.payload,
        }
        return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True)
class Submitted:
    run: RunRecord
    created: bool  # False: an idempotent replay of an earlier request


class AdmissionControl:
    """Refuses a tenant's submission once its pending backlog would pass the quota.

    Within one process the decision is exact: a request reserves its runs in the same step (no
    await between) as it compares count + reserved + adding with the quota, so concurrent requests
    cannot all pass on one stale figure (20 concurrent batches of 200 against a quota of 200 wrote
    800). The count is bounded (quota + 1 rows at most) and shared: it is taken again once it is
    older than `ttl_seconds` (a tenth of that past nine tenths of the quota), by one request while
    the others wait for it. So a flood costs a few counts per second per tenant, not one per
    request, and what one process admitted since the count is added in as it commits.

    Across API processes a count cannot see what the others admitted after it was taken: the
    overshoot is bounded by what the other processes admit for that tenant within one count's age
    (at most `ttl_seconds / 10` near the quota). It is a backlog bound, not a rate limit."""

    def __init__(self, max_pending: int, ttl_seconds: float = 1.0):
        self.max_pending = max_pending
        self.ttl_seconds = ttl_seconds
        self._backlogs: dict[str, _Backlog] = {}

    def ticket(self, tenant_id: str) -> Ticket:
        return Ticket(self, self._backlogs.setdefault(tenant_id, _Backlog()), tenant_id)

    def known_full(self, tenant_id: str) -> OverQuota | None:
        """The refusal, if a count at most `ttl_seconds` old already says no run fits: the route
        answers 429 without reading (and parsing) a body that would be refused anyway."""
        backlog = self._backlogs.get(tenant_id)
        if backlog is None or time.monotonic() - backlog.counted_at > self.ttl_seconds:
            return None
        if backlog.count + backlog.reserved < self.max_pending:
            return None
        return _over_quota(tenant_id, backlog.count + backlog.reserved, self.max_pending)

    def _fresh_enough(self, backlog: _Backlog, adding: int) -> bool:
        age = time.monotonic() - backlog.counted_at
        # Near the quota a stale count matters; far from it, counting often would only cost.
        near = (backlog.count + backlog.reserved + adding) * 10 > self.max_pending * 9
        return age <= (self.ttl_seconds / 10 if near else self.ttl_seconds)


def _set_event() -> asyncio.Event:
    event = asyncio.Event()
    event.set()
    return event


@dataclass
class _Backlog:
    count: int = 0  # pending at the last count, plus what this process admitted and committed since
    counted_at: float = float("-inf")
    reserved: int = 0  # admitted by this process, not yet committed or abandoned
    counting: asyncio.Future[None] | None = None
    idle: asyncio.Event = field(default_factory=_set_event)  # set while nothing is reserved


class Ticket:
    """One request's admission: `admit` reserves, then exactly one of `committed` (the runs exist)
    or `release` (nothing was written) settles the reservation."""

    def __init__(self, control: AdmissionControl, backlog: _Backlog, tenant_id: str):
        self._control = control
        self._backlog = backlog
        self._tenant_id = tenant_id
        self._reserved = 0

    async def admit(self, count_pending: Callable[[int], Awaitable[int]], adding: int) -> None:
        """Reserves `adding` runs, or raises OverQuota. `count_pending(limit)` counts the tenant's
        pending runs (up to `limit`): called only when the shared count is too old."""
        control, backlog = self._control, self._backlog
        if backlog.counting is not None:  # another request is counting: its answer serves all
            await asyncio.shield(backlog.counting)
        elif not control._fresh_enough(backlog, adding):
            backlog.counting = asyncio.get_running_loop().create_future()
            try:
                # The runs this process is inserting settle first (no new ones are admitted while a
                # count is due), so the count sees each of them once: in the database, not also in
                # `reserved`. Counted mid-insert, a run committed but not yet settled was counted
                # twice and the tenant refused below its quota (9 of 10 admitted, under load).
                await backlog.idle.wait()
                fresh = await count_pending(control.max_pending + 1)
                backlog.count, backlog.counted_at = fresh, time.monotonic()
            finally:
                backlog.counting.set_result(None)
                backlog.counting = None
        # From here to the reservation nothing awaits: the check and the reservation are one step.
        pending = backlog.count + backlog.reserved
        if pending + adding > control.max_pending:
            raise _over_quota(self._tenant_id, pending, control.max_pending)
        backlog.reserved += adding
        self._reserved += adding
        if backlog.reserved:
            backlog.idle.clear()

    def committed(self) -> None:
        self._backlog.count += self._reserved
        self.release()

    def release(self) -> None:
        self._backlog.reserved -= self._reserved
        self._reserved = 0
        if not self._backlog.reserved:
            self._backlog.idle.set()


def _over_quota(tenant_id: str, pending: int, max_pending: int) -> OverQuota:
    return OverQuota(
        f"tenant {tenant_id!r} has {pending} pending runs; the backlog quota is {max_pending}",
        field="tenant_id",
        headers={"Retry-After": "5"},
    )


class _LostRace(Exception):
    """A concurrent request committed the same idempotency key first; the transaction is retried."""


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
        except asyncpg.LockNotAvailableError:
            # insert_idempotency_keys waited IDEMPOTENCY_IN_FLIGHT_WAIT for another request holding
            # the same key, uncommitted (the IETF Idempotency-Key draft's "request in progress").
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
        traceparent=traceparent,
        notify=notify,
    )
    if len(inserted) != len(fresh):
        # insert_runs wrote nothing: some run names a job this tenant does not have.
        missing = await run_repo.missing_jobs(conn, tenant_id, [requests[i].job for i in fresh])
        first = next(requests[i] for i in fresh if requests[i].job in missing)
        raise InvalidInput(f"job {first.job!r} does not exist", field=f"{first.field}job")
    created: dict[int, asyncpg.Record] = {fresh[row["ord"] - 1]: row for row in inserted}

    keyed = [i for i in fresh if requests[i].idempotency_key is not None]
    if keyed:
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
    return out
