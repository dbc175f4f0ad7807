"""Event bodies: what an event carries, the runs it made."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.common import PAYLOAD_RULE, Strict
from app.api.schemas.runs import Run


class EventPublish(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"payload": {"order": 42}}]})
    payload: Any = Field(
        default=None, description=f"Each run's payload; default: each job's own. {PAYLOAD_RULE}"
    )


class EventRuns(BaseModel):
    runs: list[Run] = Field(
        description="One run per subscribed job, in job name order; none if no job subscribes."
    )
