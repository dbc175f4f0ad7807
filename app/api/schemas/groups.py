"""Group and event bodies: a batch's group, a run joining an open group, a group's progress, an
event's runs."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, HttpUrl

from app.api.schemas.common import PAYLOAD_RULE, JobName, Strict
from app.services.events import NAME
from app.services.events import NAME_RULE as EVENT_NAME_RULE

# Group and event names are spelled as job names are (app.services.events.NAME).
NAME_PATTERN = f"^{NAME.pattern}$"
GroupName = Annotated[str, Field(pattern=NAME_PATTERN, examples=["nightly-import"])]
EventName = Annotated[str, Field(pattern=NAME_PATTERN, examples=["order.placed"])]
NAME_RULE = f"{EVENT_NAME_RULE} (as job names)."
MAX_EVENTS = 32  # events one job subscribes to


class GroupCallback(Strict):
    url: HttpUrl = Field(
        description="Receives the completed group (POST, signed like webhooks, type `group.completed`). "
        "Its host must resolve to public addresses."
    )


class OnComplete(Strict):
    """Exactly one of `job` (with its `payload`) or `callback`."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"job": "report", "payload": {"day": "2030-01-01"}}]}
    )
    job: JobName | None = Field(
        default=None,
        description="A job of the tenant: one run of it is submitted once the group completes, its "
        "payload `payload` with `group` (id, name, total and a count per terminal status) set in it.",
    )
    payload: dict[str, Any] | None = Field(
        default=None,
        description=f"The completion run's payload, a JSON object (default {{}}). {PAYLOAD_RULE}",
    )
    callback: GroupCallback | None = Field(
        default=None, description="Told once the group completes, instead of a run."
    )


class GroupSpec(Strict):
    """A batch's group: a new one (`name`, optional `on_complete`), or an open one to join (`id`)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"name": "nightly-import", "on_complete": {"job": "report"}}]},
    )
    id: UUID | None = Field(default=None, description="An open group of the tenant to add the runs to.")
    name: GroupName | None = Field(default=None, description=f"A new group's name. {NAME_RULE}")
    on_complete: OnComplete | None = Field(
        default=None, description="What a new group's completion does: submit one run, or one callback."
    )


class GroupRef(Strict):
    id: UUID = Field(description="An open group of the tenant: the run joins it.")


class GroupCallbackState(BaseModel):
    url: str
    status: str | None = Field(
        description="null until the group completes; then pending, delivering, delivered or failed."
    )
    attempts: int
    last_error: str | None


class Group(BaseModel):
    id: UUID
    tenant_id: str
    name: str
    on_complete: dict[str, Any] | None = Field(
        description="As submitted: `{job, payload}` or `{callback: {url}}`."
    )
    total: int = Field(description="Runs in the group.")
    pending: int = Field(description="Runs not ended yet (pending, dispatched or running).")
    succeeded: int
    failed: int
    cancelled: int
    expired: int
    created_at: datetime
    completed_at: datetime | None = Field(
        description="When its last run ended: every run terminal. Then no run may join it, and its "
        "counts stay as they were (a run retried afterwards changes nothing)."
    )
    fired_at: datetime | None = Field(
        description="When its completion run was submitted or its callback queued (seconds after "
        "completed_at; later while the tenant is over its backlog quota)."
    )
    completion_run_id: UUID | None = Field(description="The run on_complete.job made.")
    fire_error: str | None = Field(
        description="Why the completion is not made yet (the backlog quota: it is tried again), or was "
        "given up on (its job no longer exists)."
    )
    callback: GroupCallbackState | None = Field(description="on_complete.callback's delivery.")


class GroupList(BaseModel):
    groups: list[Group]
    next_cursor: str | None
