"""Request and response bodies of the HTTP API (the OpenAPI contract in openapi.json)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args
from uuid import UUID

from fastapi import Response
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from app.domain import JOB_FIELDS, RUN_FIELDS, AttemptOutcomeName, HeldReason, JobRecord, RunStatus, dump_json
from app.errors import PROBLEM_JSON, PROBLEM_TYPE
from app.services.callbacks import Callback, CallbackState
from app.services.targets import HttpTarget, NoopTarget, PythonTarget, Target

TENANT_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
JOB_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
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

JobName = Annotated[str, Field(pattern=JOB_NAME_PATTERN, examples=["send-report"])]
# The `type` tags of a job's target, as the discriminated union `Target` declares them.
TARGET_TYPES = frozenset(
    get_args(m.model_fields["type"].annotation)[0] for m in (HttpTarget, PythonTarget, NoopTarget)
)
PAYLOAD_RULE = "Any JSON, at most SCHEDULER_MAX_PAYLOAD_BYTES (65536) encoded, without NUL characters."
# No control characters: the header form cannot carry them, so neither may the body form, and a
# NUL cannot be stored in a Postgres text column (it was a 500).
IdempotencyKey = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f\x7f]+$")]
# Oban's convention: 0 most urgent, 9 least. Strict: "1" or 1.5 or true is a 422, not a guess.
PRIORITY_RULE = "0 (most urgent) to 9 (least); among due runs, a more urgent one is claimed first."
Priority = Annotated[int, Field(ge=0, le=9, strict=True, description=PRIORITY_RULE)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TenantCreate(Strict):
    id: Annotated[str, Field(pattern=TENANT_ID_PATTERN, examples=["acme"])]


class TenantCreated(BaseModel):
    id: str
    key_id: str = Field(description="Names the key for listing and revoking; not a secret.")
    api_key: str = Field(description="Shown once.")
    signing_secret: str = Field(
        description="Verifies webhook calls (Standard Webhooks: `whsec_` + base64). Shown once."
    )


class SigningSecretRotation(Strict):
    overlap_seconds: float | None = Field(
        default=None,
        ge=0,
        le=7 * 86400,
        description="How long the previous secret keeps signing beside the new one; "
        "default SCHEDULER_SIGNING_SECRET_OVERLAP_SECONDS. 0 retires it at once (a leaked secret).",
    )


class SigningSecretCreated(BaseModel):
    signing_secret: str = Field(
        description="The new secret (Standard Webhooks: `whsec_` + base64). Shown once."
    )
    previous_expires_at: datetime = Field(
        description="Until then webhooks carry a signature under the previous secret too."
    )


class KeyCreated(BaseModel):
    key_id: str = Field(description="Names the key for listing and revoking; not a secret.")
    api_key: str = Field(description="Shown once.")


class ApiKey(BaseModel):
    key_id: str
    created_at: datetime
    revoked_at: datetime | None


class ApiKeyList(BaseModel):
    keys: list[ApiKey]


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
    max_attempts: int = Field(default=3, ge=1, le=100)
    backoff_seconds: float = Field(default=10, ge=0, le=86_400)
    timeout_seconds: float = Field(default=30, gt=0, le=3_600)
    misfire: Literal["latest", "all", "skip"] = "latest"
    paused: bool = Field(
        default=False,
        description="Holds every pending run of the job and its cron (as POST …/pause); false resumes.",
    )
    priority: Priority = 5
    callback: Callback | None = Field(
        default=None, description="Told when each run ends (see Run.callback); a run may name its own."
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
    next_fire_at: datetime | None
    created_at: datetime
    updated_at: datetime
    concurrency: Concurrency | None
    in_flight: int = Field(description="Runs of the job holding a concurrency slot now.")
    rate_limit: RateLimit | None


class JobList(BaseModel):
    jobs: list[Job]
    next_cursor: str | None


class RunSubmit(Strict):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"job": "send-report", "payload": {"user": 42}}]}
    )
    job: JobName
    scheduled_at: AwareDatetime | None = Field(
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


class RunBatchSubmit(Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"runs": [{"job": "send-report", "payload": {"user": u}} for u in (1, 2)]}]
        },
    )
    runs: list[RunSubmit] = Field(min_length=1, description="At most SCHEDULER_MAX_BATCH (1000) runs.")


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
    http_status: int | None = Field(description="A webhook's answer status, when it failed with one.")
    duration_ms: float | None


class Run(BaseModel):
    id: UUID
    tenant_id: str
    job: str
    status: RunStatusName
    scheduled_at: datetime
    due_at: datetime
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
        "SCHEDULER_MAX_RESULT_BYTES (64 KiB) it is the first bytes of its JSON text, as a string."
    )
    result_truncated: bool = Field(description="The result was cut to SCHEDULER_MAX_RESULT_BYTES.")
    held: HeldReasonName | None = Field(
        description="Why a pending run is held back: its job or tenant is `paused`, it waits for a "
        "`concurrency` slot (of its job's key, of its tenant's max_in_flight, or both), or for room in "
        "its key's `rate_limit` window. due_at then says when it would be due: for `rate_limit`, not "
        "before its key's window next has room."
    )


class TenantPause(BaseModel):
    id: str
    paused: bool


MAX_IN_FLIGHT_RULE = (
    "At most this many of the tenant's runs hold an in-flight slot at a time, from their claim until "
    "their attempt ends, is reaped or is cancelled, across every engine and worker; the others wait "
    'pending with `held: "concurrency"`. null: no limit.'
)


class TenantPatch(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"max_in_flight": 10}]})

    max_in_flight: Annotated[
        int | None, Field(ge=1, le=1_000_000, strict=True, description=MAX_IN_FLIGHT_RULE)
    ]


class Tenant(BaseModel):
    id: str
    created_at: datetime
    paused: bool
    max_in_flight: int | None = Field(description=MAX_IN_FLIGHT_RULE)
    in_flight: int | None = Field(
        description="The tenant's runs holding its slot now (null while it has no max_in_flight). "
        "It can exceed max_in_flight just after the limit is lowered: running work is never stopped."
    )


class RunBatch(BaseModel):
    runs: list[Run]


class RunList(BaseModel):
    runs: list[Run]
    next_cursor: str | None


class RunRetry(Strict):
    max_attempts: int | None = Field(
        default=None,
        ge=1,
        le=100,
        description="The run's new bound on attempts, more than the attempts already made. "
        "Default: one more attempt if none is left, else the bound stays.",
    )


class RunReschedule(Strict):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"due_at": "2030-01-01T09:00:00Z"}]}
    )
    due_at: AwareDatetime = Field(
        description="ISO 8601 with a timezone: when the run may next be claimed. A past time means now; "
        "at most SCHEDULER_MAX_SCHEDULE_AHEAD_DAYS (366) ahead. The run keeps its id and scheduled_at.",
    )


class RunFilter(Strict):
    status: list[RunStatusName] | None = Field(default=None, min_length=1, max_length=6)
    job: JobName | None = None
    scheduled_after: AwareDatetime | None = Field(default=None, description="scheduled_at >= this.")
    scheduled_before: AwareDatetime | None = Field(default=None, description="scheduled_at < this.")
    ids: list[UUID] | None = Field(default=None, min_length=1, max_length=1000)


class RunAction(Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"action": "retry", "filter": {"status": ["failed"]}, "limit": 1000}]
        },
    )
    action: Literal["cancel", "retry"] = Field(
        description="cancel: pending or dispatched runs; retry: failed or cancelled runs (like POST "
        "/runs/{id}/retry, within the tenant's backlog quota)."
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


class Problem(BaseModel):
    """An error, as RFC 9457 problem details, served as application/problem+json."""

    type: str = Field(
        default=PROBLEM_TYPE,
        description="`about:blank`: each problem means what its status means; `code` names the kind.",
    )
    title: str = Field(description="The status's phrase, e.g. Unprocessable Content.", examples=["Not Found"])
    status: int = Field(ge=400, le=599)
    detail: str = Field(description="What went wrong, for a person.")
    code: str = Field(
        description="Stable, for programs: invalid_input, unauthorized, not_found, conflict, "
        "payload_too_large, over_quota, method_not_allowed, internal_error, unavailable. "
        "New codes may be added.",
        examples=["not_found"],
    )
    field: str | None = Field(
        default=None, description="The input at fault, e.g. runs[3].scheduled_at or Authorization."
    )


RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before submitting again.",
        "schema": {"type": "integer", "minimum": 0},
    }
}


def error_responses(
    *codes: int, success: dict[int, type[BaseModel]] | None = None
) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI `responses` of a route: its error answers are all problem details (a 429 with
    its Retry-After); `success` adds the other successful answers a route gives (200 beside 201)."""
    responses: dict[int | str, dict[str, Any]] = {code: {"model": Problem} for code in codes}
    if 429 in responses:
        responses[429]["headers"] = RETRY_AFTER
    for code, model in (success or {}).items():
        responses[code] = {"model": model}
    return responses


def serve_problems_as_problem_json(schema: dict[str, Any]) -> dict[str, Any]:
    """FastAPI documents every response model as application/json; errors are application/problem+json."""
    problem_ref = "#/components/schemas/Problem"
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            for response in operation.get("responses", {}).values():
                content = response.get("content", {})
                if content.get("application/json", {}).get("schema", {}).get("$ref") == problem_ref:
                    content[PROBLEM_JSON] = content.pop("application/json")
    return schema


class Health(BaseModel):
    status: str
    checks: dict[str, str] = Field(default_factory=dict)


# Checked at import: the contract and the records cannot drift apart.
if tuple(Run.model_fields) != RUN_FIELDS or tuple(Job.model_fields) != JOB_FIELDS:
    raise AssertionError("app.domain's records and the API's Run and Job list different fields")


def json_response(body: Any, status_code: int = 200) -> Response:
    """Run records (app.domain.RunRecord) are answered this way, without pydantic's re-validation:
    a batch answer is 1000 of them."""
    return Response(
        dump_json(body),
        status_code=status_code,
        media_type="application/json",
    )


def job_out(job: JobRecord) -> Job:
    return Job.model_validate(job)
