"""The audit log's answers (docs/audit.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from app.services.audit import ACTIONS

AuditAction = Literal[ACTIONS]  # type: ignore[valid-type]


class AuditActor(BaseModel):
    type: Literal["key", "admin", "session"] = Field(
        description="key: a tenant API key; admin: the admin token; session: a dashboard session."
    )
    id: str = Field(description="The key's id (never its secret), `admin`, or the session's id.")
    key_id: str | None = Field(
        default=None, description="A session's: the key it signed in with (null: the admin token)."
    )


class AuditEvent(BaseModel):
    at: datetime = Field(description="When the change was made (it committed with this event).")
    id: UUID
    actor: AuditActor
    action: AuditAction = Field(description="What was done, e.g. `job.put` or `runs.bulk_cancelled`.")
    target: str = Field(
        description="What it was done to: `tenant:<id>`, `key:<id>`, `job:<name>`, "
        "`run:<id>`, or `runs` (a bulk action, its filter in detail)."
    )
    request_id: str = Field(description="The request's X-Request-ID (given or made by the API).")
    detail: dict[str, Any] = Field(description="Bounded facts of the change; never a payload or a secret.")


class AuditEventList(BaseModel):
    events: list[AuditEvent]
    next_cursor: str | None = Field(description="Send it back as `cursor` for older events; null: no more.")
