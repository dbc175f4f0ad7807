"""Run bodies: submitting one or a batch, the run and its attempts, lists, retry and reschedule, and
actions on the runs a filter matches."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from app.api.schemas.common import PAYLOAD_RULE, PRIORITY_RULE, TAGS_RULE, JobName, Priority, Strict, Tags
from app.api.schemas.dependencies import DependsOnField, OnParentFailureField, PassResultsField, RefField
from app.api.schemas.groups import GroupRef, GroupSpec
from app.domain import (
    MAX_ATTEMPTS,
    MAX_EXPIRE_AFTER_SECONDS,
    MAX_TAGS,
    MIN_EXPIRE_AFTER_SECONDS,
    RUN_FIELDS,
    AttemptOutcomeName,
    HeldReason,
    RunStatus,
)
from app.services.callbacks import Callback, CallbackState
from app.services.validation import METADATA_RULE, Moment, deadline_after

# The statuses as the contract lists them, generated from the enum (an inline enum of strings in
# openapi.json, as before the enum existed).
if TYPE_CHECKING:
    RunStatusName = str
    HeldReasonName = str
    AttemptOutcomeLiteral = str
else:
    RunStatusName = Literal[tuple(s.value for s in RunStatus)]
    HeldReasonName = Literal[tuple(s.value for s in HeldReason)]
    AttemptOutcomeLiteral = Literal[tuple(o.value for o in AttemptOutcomeName)]
# No control characters: the header form cannot carry them, so neither may the body form, and a
# NUL cannot be stored in a Postgres text column (it was a 500).
IdempotencyKey = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f\x7f]+$")]


class RunSubmit(Strict):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"job": "send-report", "payload": {"user": 42}}]}
    )
    job: JobName
    scheduled_at: Moment | None = Field(
        default=None,
        description="ISO 8601 with a timezone; default now (the database's clock). At most "
        "SCHEDULER_MAX_SCHEDULE_AHEAD_DAYS (366) ahead and SCHEDULER_MAX_SCHEDULE_BEHIND_DAYS (7) behind.",
    )
    payload: Any = Field(default=None, description=f"Default: the job's payload. {PAYLOAD_RULE}")
    idempotency_key: IdempotencyKey | None = None
    priority: Priority | None = Field(
        default=None, description=f"Default: the job's priority. {PRIORITY_RULE}"
    )
    callback: Callback | None = Field(default=None, description="Default: the job's callback.")
    expires_at: Moment | None = Field(
        default=None,
        description="ISO 8601 with a timezone: the run's deadline to start. Not started by then, it ends "
        "`expired` (no attempt made) wherever it waits: pending, held or dispatched. At least "
        f"{MIN_EXPIRE_AFTER_SECONDS} s and at most {MAX_EXPIRE_AFTER_SECONDS // 86_400} days after "
        "scheduled_at (now when absent). Default: the job's expire_after_seconds after scheduled_at, "
        "or none.",
    )

    @field_validator("expires_at")
    @classmethod
    def _deadline_after_scheduled_at(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        return None if value is None else deadline_after(value, info.data.get("scheduled_at"))

    tags: Tags | None = Field(
        default=None,
        description=f"Added to the job's default tags (together at most {MAX_TAGS}). {TAGS_RULE}",
        examples=[["customer:42", "nightly"]],
    )
    metadata: dict[str, Any] | None = Field(
        default=None,
        description=f"Kept with the run, shown with it and sent in its callback. {METADATA_RULE}",
    )
    ref: RefField = None
    depends_on: DependsOnField = None
    on_parent_failure: OnParentFailureField = "cancel"
    pass_results: PassResultsField = False
    group: GroupRef | None = Field(
        default=None,
        description="An open group of the tenant the run joins (a completed one is 409). Only on a "
        "single submission: a batch names its group beside its runs.",
    )


class RunBatchSubmit(Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"runs": [{"job": "send-report", "payload": {"user": u}} for u in (1, 2)]}]
        },
    )
    runs: list[RunSubmit] = Field(min_length=1, description="At most SCHEDULER_MAX_BATCH (1000) runs.")
    group: GroupSpec | None = Field(
        default=None,
        description="The group the runs go into: a new one (`name`, and `on_complete`: one run of a job "
        "or one callback once every run of it has ended), or an open one (`id`).",
    )


class Attempt(BaseModel):
    """One attempt of a run, written by the statements that start and end it (no extra write)."""

    attempt: int
    epoch: int = Field(description="The lease fence the attempt ran under.")
    worker: str | None = Field(description="The worker's lease owner name (SCHEDULER_OWNER).")
    started_at: datetime
    finished_at: datetime | None = Field(description="Null while the attempt runs.")
    outcome: AttemptOutcomeLiteral | None = Field(
        description="Null while it runs. `lost`: its worker stopped heartbeating and the reaper "
        "closed it; `timed_out`: it passed the job's timeout_seconds."
    )
    error: str | None = Field(description="A failure's reason: for a webhook, `HTTP <status>: <excerpt>`.")
    http_status: int | None = Field(
        description="A webhook's answer status, success included (e.g. 200); null for other targets "
        "and for an attempt that got no answer (a timeout, a refused connection)."
    )
    duration_ms: float | None


class Run(BaseModel):
    id: UUID
    tenant_id: str
    job: str
    status: RunStatusName
    scheduled_at: datetime
    due_at: datetime
    expires_at: datetime | None = Field(
        description="The run's deadline to start: not started by then, it ends `expired`. Null: none. "
        "Once started, the run has met it (a later retry of a failed attempt is not expired)."
    )
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
    tags: list[str] = Field(description="The job's default tags, then the submission's own.")
    metadata: dict[str, Any] | None = Field(description="The submission's metadata, as sent.")
    callback: CallbackState | None = Field(
        description="The callback this run was submitted with and its delivery: after the run ends in "
        "one of `on`, the run as this route answers it is POSTed to `url`, signed like webhooks, "
        "at least once, retried with backoff up to a bound."
    )
    attempts: list[Attempt] = Field(
        description="Every attempt, oldest first, at most max_attempts of them (the newest kept)."
    )
    result: Any = Field(
        description="What the last successful attempt returned: a python handler's value, a webhook's "
        "body (JSON if it is application/json and parses, else its text). Over "
        "SCHEDULER_MAX_RESULT_BYTES (64 KiB) it is the first bytes of its JSON text, as a string; "
        "JSON beyond a payload's bounds (nested deeper than SCHEDULER_MAX_PAYLOAD_DEPTH (32), an "
        "integer beyond 64 bits, a number beyond a double) is its text, as a string."
    )
    result_truncated: bool = Field(
        description="The result is not the value as returned: cut to SCHEDULER_MAX_RESULT_BYTES, or "
        "JSON beyond a payload's bounds kept as its text."
    )
    held: HeldReasonName | None = Field(
        description="Why a pending run is held back: its job or tenant is `paused`, it waits for a "
        "`concurrency` slot (of its job's key, of its tenant's max_in_flight, or both), or for room in "
        "its key's `rate_limit` window, or for its parents to succeed (`dependencies`). due_at then "
        "says when it would be due: for `rate_limit`, not "
        "before its key's window next has room."
    )
    dedupe_key: str | None = Field(
        description="The key this run claimed under its job's `unique` or `debounce` rule: the JSON text "
        "of the payload field the rule names (`null` when the payload lacks it; over 200 characters, "
        '`sha256:` and its hash), or `""` when the rule names none. Null when the job had no rule.'
    )
    depends_on: list[UUID] = Field(description="The ids of the runs this run waits for, as submitted.")
    dependents: int = Field(description="How many runs were submitted depending on this one.")
    group_id: UUID | None = Field(
        description="The group the run is in (GET /tenants/{tenant_id}/groups/{group_id}), or null."
    )


class RunBatch(BaseModel):
    runs: list[Run] = Field(description="One run per item, in order.")
    created: list[bool] = Field(
        description="One per item, in order: true when the item created its run; false when it was "
        "answered with a run that exists (an idempotent replay, a duplicate of a `unique` job's run — "
        "made earlier or by an earlier item — or a submission folded into a `debounce` job's pending run)."
    )
    group_id: UUID | None = Field(
        default=None,
        description="The group the batch's runs went into; for a replay that created nothing, the "
        "group its runs joined.",
    )


class RunList(BaseModel):
    runs: list[Run]
    next_cursor: str | None


class RunRetry(Strict):
    max_attempts: int | None = Field(
        default=None,
        ge=1,
        le=MAX_ATTEMPTS,
        description="The run's new bound on attempts, more than the attempts already made. "
        "Default: one more attempt if none is left, else the bound stays. A run that made 100 "
        "attempts is not retried (409).",
    )


class RunReschedule(Strict):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"due_at": "2030-01-01T09:00:00Z"}]}
    )
    due_at: Moment = Field(
        description="ISO 8601 with a timezone: when the run may next be claimed. A past time means now; "
        "at most SCHEDULER_MAX_SCHEDULE_AHEAD_DAYS (366) ahead. The run keeps its id and scheduled_at.",
    )


class RunFilter(Strict):
    status: list[RunStatusName] | None = Field(default=None, min_length=1, max_length=len(RunStatus))
    job: JobName | None = None
    scheduled_after: Moment | None = Field(default=None, description="scheduled_at >= this.")
    scheduled_before: Moment | None = Field(default=None, description="scheduled_at < this.")
    ids: list[UUID] | None = Field(default=None, min_length=1, max_length=1000)
    tags: Tags | None = Field(default=None, min_length=1, description=f"Runs carrying every one. {TAGS_RULE}")


class RunAction(Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"action": "retry", "filter": {"status": ["failed"]}, "limit": 1000}]
        },
    )
    action: Literal["cancel", "retry"] = Field(
        description="cancel: pending, dispatched or running runs; retry: failed, cancelled or expired runs "
        "(like POST /runs/{id}/retry, within the tenant's backlog quota)."
    )
    filter: RunFilter = Field(default_factory=RunFilter, description="All given criteria must hold.")
    limit: int = Field(
        default=1000, ge=1, le=10_000, description="At most this many matching runs per request."
    )
    cursor: str | None = Field(
        default=None, max_length=256, description="A next_cursor from the previous answer: go on from there."
    )


class RunActionResult(BaseModel):
    matched: int = Field(description="Runs that matched the filter and were looked at.")
    changed: int = Field(description="Runs this request moved to the action's state (none twice).")
    next_cursor: str | None = Field(description="Send it back as `cursor` to go on; null: done.")


# Checked at import: the contract and the record cannot drift apart.
if tuple(Run.model_fields) != RUN_FIELDS:
    raise AssertionError("app.domain's RunRecord and the API's Run list different fields")
