"""Input checks shared by the routes and services."""

from __future__ import annotations

from typing import Any

import orjson

from app.errors import PayloadTooLarge


def check_payload_size(payload: Any, limit: int, *, field: str) -> None:
    size = len(orjson.dumps(payload))
    if size > limit:
        raise PayloadTooLarge(f"{field} is {size} bytes; the limit is {limit}", field=field)
