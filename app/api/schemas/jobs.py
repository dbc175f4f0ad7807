"""Job bodies: the job (its rules over its runs: app.api.schemas.job_rules), the list of jobs, and a
cron job's backfill."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.api.schemas.common import PAYLOAD_RULE, TAGS_RULE, Priority, Strict, Tags
from app.api.schemas.groups import MAX_EVENTS, NAME_RULE, EventName
from app.api.schemas.job_rules import Concurrency, Debounce, RateLimit, Unique
from app.api.schemas.runs import Run
from app.domain import (
    DEFAULT_PRIORITY,
    JOB_FIELDS,
    MAX_ATTEMPTS,
    MAX_EXPIRE_AFTER_SECONDS,
    MIN_EXPIRE_AFTER_SECONDS,
    JobRecord,
    PausedReason,
)
from app.services.backfill import MAX_BACKFILL
from app.services.callbacks import Callback
from app.services.cron import MAX_JITTER_SECONDS, Overlap
from app.services.targets import Target
from app.services.validation import Moment

if TYPE_CHECKING:
    PausedReasonName = str
else:  # the contract's inline enum of strings, generated from the enum
    PausedReasonName = Literal[tuple(r.value for r in PausedReason)]


class JobPut(Strict):
    # Examples are whole valid bodies: contract tests (schemathesis) send them as they are.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"target": {"type": "noop"}},
                {
                    "target": {"type": "python", "handler": "echo"},
                    "schedule": "30 2 * * *",
                    "timezone": "Europe/Berlin",
                    "misfire": "latest",
                },
            ]
        },
    )
    target: Target = Field(
        description="What a run calls: a signed webhook (`http`), a handler the deployment "
        "registered (`python`), or nothing (`noop`). A webhook's host must resolve to public addresses.",
    )
    schedule: str | None = Field(default=None, max_length=200, examples=["*/5 * * * *"])
    timezone: str = Field(default="UTC", max_length=64)
    payload: Any = Field(
        default_factory=dict, description=f"Each run's payload unless it brings one. {PAYLOAD_RULE}"
    )
    max_attempts: int = Field(default=3, ge=1, le=MAX_ATTEMPTS)
    backoff_seconds: float = Field(default=10, ge=0, le=86_400)
    timeout_seconds: float = Field(default=30, gt=0, le=3_600)
    expire_after_seconds: float | None = Field(
        default=None,
        ge=MIN_EXPIRE_AFTER_SECONDS,
        le=MAX_EXPIRE_AFTER_SECONDS,
        description="Each run's deadline to start, this long after its scheduled_at (1 s to 31 days), "
        "unless the run brings its own expires_at: not started by then, the run ends `expired`. "
        "Null: no deadline. Applies to runs created after it is set, cron occurrences included.",
    )
    misfire: Literal["latest", "all", "skip"] = "latest"
    paused: bool = Field(
        default=False,
        description="Holds every pending run of the job and its cron (as POST …/pause); false resumes.",
    )
    priority: Priority = DEFAULT_PRIORITY
    callback: Callback | None = Field(
        default=None, description="Told when each run ends (see Run.callback); a run may name its own."
    )
    tags: Tags = Field(
        default_factory=list,
        description=f"Every run's tags, before those it brings (cron runs carry these). {TAGS_RULE}",
    )
    concurrency: Concurrency | None = Field(
        default=None, description="A per-key concurrency limit; it applies to runs submitted after it is set."
    )
    rate_limit: RateLimit | None = Field(
        default=None,
        description="A per-key rate limit on starts; it applies to runs submitted after it is set (a "
        "changed one to those waiting too; removing it releases them). Not beside `concurrency`.",
    )
    overlap: Overlap = Field(
        default="allow",
        description="A cron job's occurrence while its schedule's earlier runs are still live: `allow` "
        "makes it anyway; `skip` drops it while one is pending, dispatched or running; `buffer_one` "
        "drops it while one is pending (waiting to start), so at most one waits behind a running one. "
        "Decided when the occurrence is due; dropped ones are counted in "
        'scheduler_cron_occurrences_skipped_total{reason="overlap"}. Only with a `schedule`.',
    )
    jitter_seconds: int = Field(
        default=0,
        ge=0,
        le=MAX_JITTER_SECONDS,
        description="Each cron occurrence's run is scheduled this much later at most, by an offset of the "
        "occurrence's own (the same every time it is computed): its scheduled_at is that time. Only "
        "with a `schedule`.",
    )
    pause_after_failures: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="Pause the job (paused_reason `failures`) once this many of its runs in a row end "
        "`failed`; a success starts the count again, and so does a resume. Counts runs made while it "
        "is set.",
    )
    unique: Unique | None = Field(
        default=None,
        description="At most one run per key: a submission that would make a second is answered 200 "
        "with the run that exists, and writes nothing. Not beside `debounce`.",
    )
    debounce: Debounce | None = Field(
        default=None,
        description="Submissions of one key fold into one pending run, which runs once with the "
        "latest payload; each is answered with that run (200 after the first).",
    )
    on_events: list[EventName] = Field(
        default_factory=list,
        max_length=MAX_EVENTS,
        description="Events the job subscribes to: POST /tenants/{tenant_id}/events/{name} submits one "
        f"run of every job subscribed to `name`. At most {MAX_EVENTS}, each {NAME_RULE}",
        examples=[["order.placed"]],
    )

    @field_validator("on_events")
    @classmethod
    def _distinct_events(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))


class Job(BaseModel):
    tenant_id: str
    name: str
    target: Target
    schedule: str | None
    timezone: str
    payload: Any
    max_attempts: int
    backoff_seconds: float
    timeout_seconds: float
    expire_after_seconds: float | None
    misfire: str
    paused: bool
    priority: int
    callback: Callback | None
    tags: list[str]
    next_fire_at: datetime | None
    created_at: datetime
    updated_at: datetime
    concurrency: Concurrency | None
    in_flight: int = Field(description="Runs of the job holding a concurrency slot now.")
    rate_limit: RateLimit | None
    overlap: Overlap
    jitter_seconds: int
    pause_after_failures: int | None
    paused_reason: PausedReasonName | None = Field(
        description="Why the job is paused: `requested` (POST …/pause, the dashboard, a PUT) or "
        "`failures` (pause_after_failures). Null while it is not paused."
    )
    consecutive_failures: int = Field(
        description="Its runs that ended `failed` in a row, counted while pause_after_failures is set."
    )
    unique: Unique | None
    debounce: Debounce | None
    on_events: list[str] = Field(description="The events the job subscribes to.")


class Backfill(Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"from": "2030-01-01T00:00:00Z", "to": "2030-01-02T00:00:00Z"}]},
    )
    start: Moment = Field(
        alias="from",
        description="The first occurrence time included. ISO 8601 with a timezone, at most "
        "SCHEDULER_MAX_SCHEDULE_BEHIND_DAYS (7) in the past.",
    )
    end: Moment = Field(
        alias="to",
        description=f"The end, excluded; after `from`, at most SCHEDULER_MAX_SCHEDULE_AHEAD_DAYS (366) "
        f"ahead. [from, to) may hold at most {MAX_BACKFILL} occurrences.",
    )


class BackfillResult(BaseModel):
    runs: list[Run] = Field(description="The runs this request made, oldest occurrence first.")
    existing: int = Field(
        description="Occurrences in the range whose run existed already: the schedule's, or an earlier "
        "backfill's."
    )


class JobList(BaseModel):
    jobs: list[Job]
    next_cursor: str | None


# Checked at import: the contract and the record cannot drift apart.
if tuple(Job.model_fields) != JOB_FIELDS:
    raise AssertionError("app.domain's JobRecord and the API's Job list different fields")


def job_out(job: JobRecord) -> Job:
    return Job.model_validate(job)
