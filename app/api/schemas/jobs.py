"""Job bodies: the job, its concurrency and rate limits, and the list of jobs."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.common import PAYLOAD_RULE, TAGS_RULE, Priority, Strict, Tags
from app.domain import DEFAULT_PRIORITY, JOB_FIELDS, MAX_ATTEMPTS, JobRecord
from app.services.callbacks import Callback
from app.services.targets import Target

# A limit's key: a dotted path into the run's payload (concurrency and rate limits alike).
FlowKey = Annotated[
    str | None,
    Field(
        default=None,
        max_length=300,
        pattern=r"^payload(\.[A-Za-z0-9_-]{1,64}){1,8}$",
        examples=["payload.customer_id"],
        description="A dotted path into the run's payload; runs with the same value share the limit "
        "(a payload without the field: the empty key). Absent: one key for the whole job.",
    ),
]


class Concurrency(Strict):
    limit: int = Field(
        ge=1,
        le=10_000,
        description="At most this many runs of one key hold a slot at once, from "
        "their claim until their attempt ends, is reaped or is cancelled.",
    )
    key: FlowKey = None


class RateLimit(Strict):
    limit: int = Field(
        ge=1,
        le=10_000,
        description="At most this many runs of one key start in any window of period_seconds "
        "(a sliding window: never twice the limit across a period's edge). Each attempt is a start.",
    )
    # At least a second: the keeper grants room every SCHEDULER_KEEPER_INTERVAL_SECONDS (0.2 s), so
    # a shorter window could not be paced; at most a day, as the partitions' horizon.
    period_seconds: float = Field(ge=1, le=86_400, description="The window's length, 1 s to a day.")
    key: FlowKey = None


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


class JobList(BaseModel):
    jobs: list[Job]
    next_cursor: str | None


# Checked at import: the contract and the record cannot drift apart.
if tuple(Job.model_fields) != JOB_FIELDS:
    raise AssertionError("app.domain's JobRecord and the API's Job list different fields")


def job_out(job: JobRecord) -> Job:
    return Job.model_validate(job)
