"""What every layer knows about runs and jobs: a run's states, the records a service hands a route,
and the hook called when runs become pending. No I/O here, so the API, the services and the repositories can
all import it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol, TypedDict
from uuid import UUID

import orjson

# Priority runs from 0 (most urgent) to LEAST_URGENT; a job's is DEFAULT_PRIORITY unless it says.
LEAST_URGENT = 9
DEFAULT_PRIORITY = 5
# The most attempts a run may make: a job's max_attempts, a retry's, and what retries add up to (a
# retry of a run that made this many is refused), so a run's attempt history stays bounded too.
MAX_ATTEMPTS = 100
# A run's deadline to start (expires_at) lies this far after its scheduled_at: at least a second (the
# engines' sweep runs about once a second), at most 31 days (a run waiting longer than that to start
# wants an operator, not a deadline; and no input goes unbounded).
MIN_EXPIRE_AFTER_SECONDS = 1
MAX_EXPIRE_AFTER_SECONDS = 31 * 24 * 3600
# The most tags a run carries (its job's default tags and its own together), and a job names.
MAX_TAGS = 10


class RunStatus(StrEnum):
    """A run's states (the `status` column). SQL keeps its literals; Python code names these."""

    PENDING = "pending"
    DISPATCHED = "dispatched"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"  # not started by its expires_at (migration 0019)


# Runs a cancel stops: those no worker has started, and running ones (their worker is told to stop).
CANCELLABLE = (RunStatus.PENDING, RunStatus.DISPATCHED, RunStatus.RUNNING)
# Runs that ended: nothing happens to them any more unless a person retries them.
FINISHED = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.EXPIRED)
# Runs a retry moves back to pending.
RETRYABLE = (RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.EXPIRED)


class RunRecord(TypedDict):
    """A run as a service hands it to a route: the fields of the API's `Run`, taken from the row
    as they are (a plain dict: the batch answer of 1000 runs is built without pydantic)."""

    id: UUID
    tenant_id: str
    job: str
    status: str  # a RunStatus value, as the row holds it
    scheduled_at: datetime
    due_at: datetime
    expires_at: datetime | None  # its deadline to start, None: none
    attempt: int
    max_attempts: int
    priority: int
    epoch: int
    payload: Any
    created_at: datetime
    dispatched_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    last_error: str | None
    idempotency_key: str | None
    tags: list[str]  # its job's default tags, then its own; [] when none (the row holds NULL)
    metadata: dict[str, Any] | None  # what its submission brought, unread by the scheduler
    # The run's callback and its delivery state (app.services.callbacks fills the state in), or None.
    callback: dict[str, Any] | None
    attempts: list[Any]  # history entries, oldest first (AttemptOutcomeName for their outcome)
    result: Any
    result_truncated: bool
    held: str | None  # a HeldReason value while the run is held back, else None
    dedupe_key: str | None  # the key it claimed under its job's unique or debounce rule
    depends_on: list[UUID]  # its parents' ids, as submitted; [] when none (the row holds NULL)
    dependents: int  # how many runs were submitted depending on it (the row holds NULL for none)
    group_id: UUID | None  # the group it is in (app.services.groups), or None


RUN_FIELDS = tuple(RunRecord.__annotations__)


class HeldReason(StrEnum):
    """Why a pending run is held back (the `held` column; migrations 0010, 0013)."""

    PAUSED = "paused"
    CONCURRENCY = "concurrency"
    RATE_LIMIT = "rate_limit"  # waiting for room in its key's window (migration 0013)
    DEPENDENCIES = "dependencies"  # waiting for its parents to succeed (migration 0023)


def run_record(row: Any) -> RunRecord:
    """The record of a database row (an asyncpg Record, or any mapping with the run's columns)."""
    record: RunRecord = {k: row[k] for k in RUN_FIELDS}  # type: ignore[assignment]
    if record["tags"] is None:
        record["tags"] = []
    if record["depends_on"] is None:
        record["depends_on"] = []
    if record["dependents"] is None:
        record["dependents"] = 0
    if record["callback"] is not None:
        # Nothing is owed until the run ends in one of `on`.
        record["callback"] = {**record["callback"], "status": None, "attempts": 0, "last_error": None}
    record["attempts"] = attempt_history(row)
    if row["held"] is not None:
        # A held run's due_at is 'infinity' (out of the claim's range); it shows when it would be due,
        # and a run waiting for its rate limit not before its key's window has room (get_run reads
        # that time as held_until; other reads leave it out).
        until = row.get("held_until") if hasattr(row, "get") else None
        record["due_at"] = row["held_due_at"] if until is None else max(row["held_due_at"], until)
    return record


def dump_json(body: Any) -> bytes:
    """Run records as JSON, one encoding for the API's answers and the callbacks' bodies: orjson
    writes datetimes as RFC 3339 with Z for UTC, as pydantic does; asyncpg's UUIDs via str."""
    return orjson.dumps(body, default=str, option=orjson.OPT_UTC_Z)


def attempt_history(row: Any) -> list[Any]:
    """A run's attempts, oldest first, at most max_attempts. The `attempts` column holds the ones
    that ended without success (appended by finish_runs and the reaper) and a webhook's success
    (for its answer's status); the attempt in progress and any other successful last one are the
    row's own columns, so the start and such a success write nothing more (the noop drain's budget:
    see migration 0006)."""
    history = list(row["attempts"])
    status, started_at = row["status"], row["started_at"]
    if (
        status in (RunStatus.RUNNING, RunStatus.SUCCEEDED)
        and started_at is not None
        and not _recorded(history, row)
    ):
        finished_at = row["finished_at"] if status == RunStatus.SUCCEEDED else None
        history.append(
            {
                "attempt": row["attempt"],
                "epoch": row["epoch"],
                "worker": row["lease_owner"],
                "started_at": started_at,
                "finished_at": finished_at,
                "outcome": AttemptOutcomeName.SUCCEEDED.value if finished_at is not None else None,
                "error": None,
                "http_status": None,
                "duration_ms": None
                if finished_at is None
                else round((finished_at - started_at).total_seconds() * 1000),
            }
        )
    return history[-row["max_attempts"] :] if row["max_attempts"] > 0 else history


def _recorded(history: list[Any], row: Any) -> bool:
    """Whether the row's own attempt is in its stored history already (a webhook's success)."""
    return bool(history) and (history[-1]["attempt"], history[-1]["epoch"]) == (row["attempt"], row["epoch"])


class AttemptOutcomeName(StrEnum):
    """An attempt's outcome in the run's history (`attempts[].outcome`; null while it runs)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"  # its worker stopped heartbeating; the reaper closed it
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class StoredResult:
    """A run's result as finish_runs stores it: JSON text within SCHEDULER_MAX_RESULT_BYTES (made
    so by app.services.answers), and whether it was cut to fit."""

    json: str | None
    truncated: bool = False


NO_RESULT = StoredResult(None)


class AttemptOutcome(Protocol):
    """What one finished attempt came to, as finish_runs records it (a worker's Delivery)."""

    ok: bool
    error: str | None
    http_status: int | None
    retry_after: float | None  # seconds, already bounded; None: the backoff applies
    result: StoredResult

    @property
    def outcome(self) -> str: ...


class JobRecord(TypedDict):
    """A job as a service hands it to a route: the fields of the API's `Job`."""

    tenant_id: str
    name: str
    target: Any  # the target's JSON object, as stored
    schedule: str | None
    timezone: str
    payload: Any
    max_attempts: int
    backoff_seconds: float
    timeout_seconds: float
    expire_after_seconds: float | None  # each run's default deadline, after its scheduled_at
    misfire: str
    paused: bool
    priority: int
    callback: dict[str, Any] | None
    tags: list[str]  # each run's default tags; [] when none (the row holds NULL)
    next_fire_at: datetime | None
    created_at: datetime
    updated_at: datetime
    concurrency: Any  # {"limit": n, "key": "payload.…" | None}, or None
    in_flight: int  # runs holding a concurrency slot now
    rate_limit: Any  # {"limit": n, "period_seconds": p, "key": "payload.…" | None}, or None
    overlap: str  # "allow" | "skip" | "buffer_one" (app.services.cron.Overlap)
    jitter_seconds: int
    pause_after_failures: int | None
    paused_reason: str | None  # a PausedReason value while paused, else None
    consecutive_failures: int  # its runs that ended failed since the last success (or resume)
    unique: Any  # {"key": "payload.…" | None, "within_seconds": n | None}, or None
    debounce: Any  # {"key": "payload.…" | None, "period_seconds": p, "max_delay_seconds": m}, or None
    on_events: list[str]  # the events it subscribes to; [] when none (the row holds NULL)


class PausedReason(StrEnum):
    """Who paused a job (the `paused_reason` column, migration 0020)."""

    REQUESTED = "requested"  # POST …/pause, the dashboard, a PUT with paused: true
    FAILURES = "failures"  # pause_after_failures runs in a row ended failed


JOB_FIELDS = tuple(JobRecord.__annotations__)


def job_record(row: Any) -> JobRecord:
    record: JobRecord = {k: row[k] for k in JOB_FIELDS}  # type: ignore[assignment]
    if record["tags"] is None:
        record["tags"] = []
    if record["on_events"] is None:
        record["on_events"] = []
    return record


class StopRunning(Protocol):
    """Called with rows (id, epoch) of runs a cancel took out of `running`, after its commit: tells
    the workers to stop those attempts (app.bus.cancels). Best effort: a worker not told finds out
    at its next heartbeat."""

    async def __call__(self, runs: Iterable[Any], /) -> None: ...


async def no_stop_notice(runs: Iterable[Any], /) -> None:
    return None
