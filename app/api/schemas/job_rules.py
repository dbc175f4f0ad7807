"""A job's rules over its runs, each keyed by a path into the run's payload: its concurrency and rate
limits (docs/flow-control.md), its unique or debounce rule."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field

from app.api.schemas.common import Strict

# A key's path into the run's payload: `payload.` and 1 to 8 names (limits, unique, debounce).
PAYLOAD_PATH = r"^payload(\.[A-Za-z0-9_-]{1,64}){1,8}$"
# A limit's key: a dotted path into the run's payload (concurrency and rate limits alike).
FlowKey = Annotated[
    str | None,
    Field(
        default=None,
        max_length=300,
        pattern=PAYLOAD_PATH,
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


# A unique or debounce rule's key: a dotted path into the run's payload, as a limit's key.
DedupeKey = Annotated[
    str | None,
    Field(
        default=None,
        max_length=300,
        pattern=PAYLOAD_PATH,
        examples=["payload.user_id"],
        description='A dotted path into the run\'s payload; runs with equal values (as JSON: 1 and "1" '
        "differ) share the key, and so do runs whose payload lacks the field or has it null. "
        "Absent or null: one key for the whole job.",
    ),
]
# The longest a unique window may be: a month, beyond which a per-key ledger outlives any sane retry.
MAX_UNIQUE_WITHIN_SECONDS = 30 * 86_400


class Unique(Strict):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"key": "payload.user_id", "within_seconds": 3600}]}
    )
    key: DedupeKey = None
    within_seconds: float | None = Field(
        default=None,
        ge=1,
        le=MAX_UNIQUE_WITHIN_SECONDS,
        description="At most one run per key created within this many seconds (1 s to 30 days), "
        "whatever became of it. Null: at most one live run (pending, dispatched or running) per key.",
    )


class Debounce(Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"key": "payload.doc_id", "period_seconds": 5, "max_delay_seconds": 60}]
        },
    )
    key: DedupeKey = None
    period_seconds: float = Field(
        ge=1,
        le=3_600,
        description="A key's first submission makes a run due this long after it (1 s to an hour); each "
        "later one while that run is pending replaces its payload and makes it due this long after itself.",
    )
    max_delay_seconds: float = Field(
        ge=1,
        le=86_400,
        description="The run is never due later than this long after the key's first submission: at "
        "least period_seconds, at most a day.",
    )
