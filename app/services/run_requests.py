"""A submission's requests and the idempotency rules over them: which requests create a run and
which replay an earlier one."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from app.domain import RunRecord
from app.errors import InvalidInput
from app.services.dependencies import NO_DEPENDENCIES, Dependencies

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
    field: str  # where this request sits in the body, for error messages ("" or "runs[3].")
    priority: int | None = None  # None: the job's priority
    callback: dict[str, Any] | None = None  # validated (app.services.callbacks); None: the job's
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
