"""Submitting runs: one or a batch, all-or-nothing, idempotent, under the tenant's backlog quota, each
answered with the run a job's unique or debounce rule names (app.services.dedupe).

A caller outside (the API's routes, the dashboard) hands a Submission, as sent, to the process's
Submitter, which checks it and then submits it; a caller inside (a group's completion, an event's
fan-out) submits requests it made itself (`submit`). Each attempt's writes: app.services.submission_writes."""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from uuid import UUID

import asyncpg

from app import pending
from app.config import Settings
from app.db import runs as run_repo
from app.errors import Conflict
from app.services import audit as audit_log
from app.services import dedupe
from app.services import groups as group_service
from app.services.admission import AdmissionControl
from app.services.callbacks import validate_callback
from app.services.dedupe import RULED_JOBS
from app.services.groups import GroupPlan
from app.services.run_requests import RunRequest, Submission, Submitted, checked
from app.services.submission_writes import KeyInFlight, LostRace, write
from app.services.wakeups import WakeUps
from app.telemetry import metrics
from app.telemetry.tracing import submitter_traceparent


@dataclass(frozen=True)
class Answer:
    runs: list[Submitted]  # one per run asked for, in order
    # The group the runs went into; for a replay that created nothing, the one its runs joined.
    group_id: UUID | None = None


class Submitter:
    """Submits what callers outside send (the API's routes and the dashboard alike), built once per
    process: each submission's input checked (InvalidInput naming the field at fault, nothing
    written), then submitted."""

    def __init__(self, settings: Settings, pool: asyncpg.Pool, admission: AdmissionControl, wakeups: WakeUps):
        self.settings = settings
        self.pool = pool
        self.admission = admission
        self.wakeups = wakeups

    async def submit(self, submission: Submission, *, executor: Executor | None = None) -> Answer:
        """Each run asked for answered in order, and the group they went into. A refusal is the
        InvalidInput (PayloadTooLarge for a payload over its bound) naming the field at fault, with
        nothing written. A batch's checks walk every payload (a second for 16 MiB of small values):
        they run in a thread, not on the event loop, which the engine shares; `executor`'s if given."""
        check = functools.partial(checked, submission, self.settings)
        if not submission.batch:
            runs = check()
        elif executor is None:
            runs = await asyncio.to_thread(check)
        else:
            runs = await asyncio.get_running_loop().run_in_executor(executor, check)
        runs = [await self._with_callback(run) for run in runs]
        group = await self._group(submission)
        submitted = await submit(
            self.pool,
            self.admission,
            submission.tenant_id,
            runs,
            submission.traceparent,
            self.wakeups,
            group,
            submission.audit,
        )
        if group is None or any(s.created for s in submitted):
            return Answer(submitted, None if group is None else group.id)
        # A replay that created nothing made no group: it is answered with the one its runs joined.
        joined = [s.run["group_id"] for s in submitted if s.deduplicated_by is None and s.run["group_id"]]
        return Answer(submitted, next(iter(joined), None))

    async def _with_callback(self, run: RunRequest) -> RunRequest:
        """The run with its callback checked and normalized; its host may be resolved."""
        if run.callback is None:
            return run
        callback = await validate_callback(
            run.callback, field=f"{run.field}callback", allow_private=self.settings.allow_private_targets
        )
        return replace(run, callback=callback)

    async def _group(self, submission: Submission) -> GroupPlan | None:
        if submission.group is None:
            return None
        s = self.settings
        return await group_service.plan(
            self.pool,
            submission.tenant_id,
            dict(submission.group),
            group_service.Limits(s.allow_private_targets, s.max_payload_bytes, s.max_payload_depth),
            may_create=submission.batch,
        )


async def submit(
    pool: asyncpg.Pool,
    admission: AdmissionControl,
    tenant_id: str,
    requests: list[RunRequest],
    traceparent: str | None,
    wakeups: WakeUps | None = None,
    group: GroupPlan | None = None,
    audit: audit_log.AuditContext | None = None,
) -> list[Submitted]:
    """Runs the requests in one transaction; once committed, the runs made pending are published
    (app.pending). `traceparent`: the caller's. The runs created go into
    `group` (app.services.groups), in the same transaction. `audit`: a dashboard trigger's."""
    notify = wakeups.due(r.scheduled_at for r in requests) if wakeups is not None else True
    traceparent = submitter_traceparent(traceparent)
    keyed = any(r.idempotency_key is not None for r in requests)
    ruled = RULED_JOBS.any_of(tenant_id, {r.job for r in requests})
    linked = any(r.dependencies.depends_on for r in requests)  # its edges are written after its runs
    for attempt in range(3):
        ticket = admission.ticket(tenant_id)
        try:
            async with pool.acquire() as conn:
                submitted = await write(
                    conn,
                    ticket,
                    tenant_id,
                    requests,
                    traceparent,
                    notify,
                    keyed or ruled or linked,
                    ruled,
                    group,
                    audit,
                )
            ticket.committed(sum(s.created for s in submitted))
            await pending.runs_pending(
                [s.run for s in submitted if s.created or s.deduplicated_by == "debounce"]
            )
            for rule in ("unique", "debounce"):
                answered = sum(s.deduplicated_by == rule for s in submitted)
                if answered:
                    metrics.submissions_deduplicated_total.labels(rule).inc(answered)
            return submitted
        except asyncpg.CheckViolationError as exc:
            # A run for a day whose partition is being attached this instant routed to DEFAULT on the
            # old partition list and was refused (nothing was written); planned again, it finds the day.
            if attempt == 2 or "partition constraint" not in str(exc):
                raise
        except asyncpg.DeadlockDetectedError:
            # Locks taken in an order no statement can fix: a submission locks the parents it names
            # in id order, a parent's end locks it and then its dependents, so naming a parent and
            # its child (whose id may be the lower) can close a cycle with that parent's end. Postgres
            # breaks it by failing one side with nothing written; this side tries again.
            if attempt == 2:
                raise
        except KeyInFlight:
            # The IETF Idempotency-Key draft's "request in progress".
            raise Conflict(
                "a request with this idempotency key is still in flight; retry once it has finished",
                field="idempotency_key",
            ) from None
        except LostRace:
            if attempt == 2:
                raise Conflict(
                    "idempotency key is being used concurrently; retry", field="idempotency_key"
                ) from None
        except dedupe.KeyLost:
            if attempt == 2:
                raise Conflict(
                    "the job's unique or debounce key is being taken concurrently; retry"
                ) from None
        finally:
            ticket.release()  # a no-op once committed
    raise AssertionError("unreachable")


async def count_pending(pool: asyncpg.Pool, tenant_id: str, limit: int) -> int:
    """The tenant's pending runs, up to `limit`: the count admission takes (AdmissionControl)."""
    async with pool.acquire() as conn:
        return await run_repo.count_pending_runs(conn, tenant_id, limit)
