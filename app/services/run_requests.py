"""A submission's requests: what a caller asks for (a Submission of RunRequests, as sent), the checks
its input passes before anything is written, and the idempotency rules over them: which requests
create a run and which replay an earlier one."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import orjson

from app.config import Settings
from app.domain import RunRecord
from app.errors import InvalidInput
from app.services.audit import AuditContext
from app.services.dependencies import NO_DEPENDENCIES, Dependencies
from app.services.validation import check_metadata, check_payload, check_schedule_window

# A key holds until its run is terminal and this long after; it goes with its run's day partition
# at the latest (docs/api.md: "Idempotency keys"). Never less than this after the submission either.
IDEMPOTENCY_GRACE_SECONDS = 24 * 3600
# How long a request waits for another one holding the same key, uncommitted, before answering 409.
IDEMPOTENCY_IN_FLIGHT_WAIT_MS = 100


@dataclass(frozen=True)
class RunRequest:
    job: str
    scheduled_at: datetime | None
    payload: Any | None  # None: the job's default payload
    idempotency_key: str | None
    field: str = ""  # where it sits in the body, for error messages ("" or "runs[3].": `checked` sets it)
    priority: int | None = None  # None: the job's priority
    # Checked (app.services.callbacks.validate_callback) before a submission is written; None: the job's.
    callback: dict[str, Any] | None = None
    expires_at: datetime | None = None  # its deadline to start; None: the job's expire_after_seconds
    tags: list[str] | None = None  # deduplicated; added to the job's
    metadata: dict[str, Any] | None = None  # checked (app.services.validation.check_metadata)
    dependencies: Dependencies = NO_DEPENDENCIES  # its parents (app.services.dependencies)

    def body_hash(self) -> str:
        """What an idempotency key is bound to: every field of the request, as it was sent."""
        body = {
            "job": self.job,
            "scheduled_at": self.scheduled_at.isoformat() if self.scheduled_at else None,
            "payload": self.payload,
            "priority": self.priority,
            "callback": self.callback,
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
            "tags": self.tags,
            "metadata": self.metadata,
            **self.dependencies.hashed(),
        }
        return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True)
class Submitted:
    """The run a request is answered with."""

    run: RunRecord
    created: bool  # False: answered with a run that exists (a replay, a unique or debounced key's)
    deduplicated_by: str | None = None  # "unique" | "debounce": the job's rule answered it


@dataclass(frozen=True)
class Submission:
    """Runs a caller asks for, as sent: what the API's routes and the dashboard build alike, for the
    Submitter (app.services.submission) to check and write."""

    tenant_id: str
    runs: Sequence[RunRequest]  # as sent: the Submitter sets their `field`s and checks their callbacks
    # A batch: at most SCHEDULER_MAX_BATCH runs, each named `runs[i].` in errors; it may make a group.
    batch: bool = False
    # The group the runs go into, as sent: an open group's `id`, or (a batch only) a new group's
    # `name` and `on_complete` (app.services.groups.plan).
    group: Mapping[str, Any] | None = None
    # A single run's key given beside it (the HTTP API's Idempotency-Key header): the run's own, if
    # it names one, must be the same.
    idempotency_key: str | None = None
    traceparent: str | None = None  # the caller's trace context
    audit: AuditContext | None = None  # who the submission is recorded as (a dashboard's trigger)

    def __post_init__(self) -> None:
        if self.idempotency_key is not None and len(self.runs) != 1:
            raise ValueError("a key beside the runs goes with a single run")


def checked(submission: Submission, settings: Settings) -> list[RunRequest]:
    """The submission's runs, each named by its place and carrying its idempotency key, once their
    input is within bounds: the batch's size, each payload's and metadata's, each scheduled_at's
    window. Otherwise InvalidInput (422; PayloadTooLarge, 413, for a payload over its bound) naming
    the first field at fault. Their callbacks are checked apart, since their hosts are resolved
    (app.services.submission)."""
    if submission.batch and len(submission.runs) > settings.max_batch:
        raise InvalidInput(f"at most {settings.max_batch} runs per batch", field="runs")
    depth = settings.max_payload_depth
    out = []
    for i, run in enumerate(submission.runs):
        field = f"runs[{i}]." if submission.batch else ""
        if run.payload is not None:
            check_payload(run.payload, settings.max_payload_bytes, max_depth=depth, field=f"{field}payload")
        if run.metadata is not None:
            check_metadata(run.metadata, max_depth=depth, field=f"{field}metadata")
        if run.scheduled_at is not None:
            check_schedule_window(
                run.scheduled_at,
                ahead_days=settings.max_schedule_ahead_days,
                behind_days=settings.max_schedule_behind_days,
                field=f"{field}scheduled_at",
            )
        key, beside = run.idempotency_key, submission.idempotency_key
        if beside is not None and key is not None and key != beside:
            raise InvalidInput(
                "Idempotency-Key header and body idempotency_key differ", field="idempotency_key"
            )
        out.append(replace(run, field=field, idempotency_key=key if beside is None else beside))
    return out


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


def unknown_job(request: RunRequest) -> InvalidInput:
    return InvalidInput(f"job {request.job!r} does not exist", field=f"{request.field}job")
