"""Tenant bodies: the tenant, its API keys, its signing secret, pause and max_in_flight."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from app.api.schemas.common import TENANT_ID_PATTERN, Strict
from app.services.auth import SCOPES, Scope

SCOPES_RULE = (
    "What the key may do: runs:read, runs:write (submit, cancel, retry, reschedule, bulk actions, "
    "backfill), jobs:read, jobs:write (define, delete, pause, resume), tenant:admin (keys, signing "
    "secrets, the audit log). A route the key's scopes do not cover answers 403."
)
# Deduplicated in the order given; the bound applies to the list as sent.
Scopes = Annotated[
    list[Scope],
    Field(min_length=1, max_length=16, description=SCOPES_RULE),
    AfterValidator(lambda scopes: list(dict.fromkeys(scopes))),
]


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


class KeyCreate(Strict):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"scopes": ["runs:read", "jobs:read"]}]}
    )

    scopes: Scopes = Field(
        default_factory=lambda: list(SCOPES),
        description=f"{SCOPES_RULE} Default: every scope. A key issues only scopes it holds itself.",
    )


class KeyCreated(BaseModel):
    key_id: str = Field(description="Names the key for listing and revoking; not a secret.")
    api_key: str = Field(description="Shown once.")
    scopes: list[Scope]


class ApiKey(BaseModel):
    key_id: str
    created_at: datetime
    revoked_at: datetime | None
    scopes: list[Scope] = Field(description=SCOPES_RULE)


class ApiKeyList(BaseModel):
    keys: list[ApiKey]


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
