"""The runs' keyset cursor, shared by the listing and bulk actions: (scheduled_at, id) of the last
run seen, opaque to the caller."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from uuid import UUID

from app.errors import InvalidInput
from app.services.validation import utc_moment


def decode_cursor(cursor: str, field: str = "cursor") -> tuple[datetime, UUID]:
    try:
        at, _, run_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        moment = datetime.fromisoformat(at)
        if moment.tzinfo is None:
            raise ValueError("no time zone")
        # In UTC here: a moment past year 9999 once it is in UTC was an OverflowError inside the query.
        return utc_moment(moment), UUID(run_id)
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidInput("cursor is not one this API returned", field=field) from exc


def encode_cursor(scheduled_at: datetime, run_id: UUID) -> str:
    return base64.urlsafe_b64encode(f"{scheduled_at.isoformat()}|{run_id}".encode()).decode()
