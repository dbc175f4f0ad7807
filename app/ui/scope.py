"""What every dashboard page and action shares: whose data a session may see, the page size, the
query parameters' bounds, and the times a form types."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Query

from app.api.schemas.common import JOB_NAME_PATTERN, TAG_PATTERN, TENANT_ID_PATTERN
from app.domain import MAX_TAGS
from app.errors import InvalidInput
from app.services.ui_sessions import UiSession
from app.services.validation import utc_moment

PAGE_SIZE = 50
TenantQuery = Annotated[str | None, Query(pattern=TENANT_ID_PATTERN)]
JobQuery = Annotated[str | None, Query(pattern=JOB_NAME_PATTERN)]
MomentQuery = Annotated[str | None, Query(max_length=64)]
DaysQuery = Annotated[int, Query(ge=1, le=30)]
# Tags typed in one field, apart by spaces or commas: room for MAX_TAGS of the longest, each with ", ".
TagsQuery = Annotated[str | None, Query(max_length=MAX_TAGS * 66)]


def scoped_tenant(session: UiSession, tenant: str | None) -> str:
    """The tenant a page shows: a tenant session's own (naming another is 404); the admin's choice."""
    principal = session.principal
    if principal.tenant_id is not None:
        if tenant is not None:
            principal.require_tenant(tenant)
        return principal.tenant_id
    if tenant is None:
        raise InvalidInput("choose a tenant on the Admin page", field="tenant")
    return tenant


def scoped_tenant_of_run(session: UiSession, tenant: str | None) -> str | None:
    """The tenant whose runs a run id may name: a tenant session's own; the admin's choice (or any)."""
    principal = session.principal
    if principal.tenant_id is not None:
        if tenant is not None:
            principal.require_tenant(tenant)
        return principal.tenant_id
    return tenant


def moment(value: str | None, field: str) -> datetime | None:
    """A time from a datetime-local input (no zone: UTC, as the pages show every time), or ISO 8601
    with its offset; empty is none."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(f"not a date and time: {value!r}", field=field) from None
    try:
        return utc_moment(parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC))
    except ValueError as exc:
        raise InvalidInput(f"{field}: {exc}", field=field) from None


def tags_of(value: str | None, field: str = "tags") -> list[str] | None:
    """The tags typed in a filter's field, apart by spaces or commas, each once; empty is none."""
    tags = list(dict.fromkeys((value or "").replace(",", " ").split()))
    if len(tags) > MAX_TAGS:
        raise InvalidInput(f"at most {MAX_TAGS} tags", field=field)
    for tag in tags:
        if not re.match(TAG_PATTERN, tag):
            raise InvalidInput(f"not a tag: {tag!r} (1 to 64 of A-Z a-z 0-9 _ . : / -)", field=field)
    return tags or None
