"""Completion callbacks: what a job or run may name, and the delivery state a run shows.

A callback is `{"url": …, "on": [terminal statuses]}`. Its URL passes the same SSRF rule as a
webhook target (resolved, every address checked: `app.services.targets.resolve_allowed`), at job PUT
and run submission here, and again by the worker before every delivery (a name may resolve elsewhere
by then). The obligation to deliver is recorded by the database, in the transaction that makes the
run terminal (migration 0008); its progress is the run's `callback.status`, `attempts`, `last_error`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

import asyncpg
from pydantic import BaseModel, ConfigDict, Field, HttpUrl, ValidationError

from app.db import callbacks as callback_repo
from app.domain import RunRecord
from app.errors import InvalidInput
from app.services.targets import resolve_allowed

CallbackOn = Literal["succeeded", "failed", "cancelled", "expired"]
CALLBACK_STATUSES: tuple[CallbackOn, ...] = ("succeeded", "failed", "cancelled", "expired")


class Callback(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: HttpUrl = Field(
        description="Receives the finished run (POST, signed like webhooks). Its host must resolve to "
        "public addresses.",
    )
    on: list[CallbackOn] = Field(
        default=list(CALLBACK_STATUSES),
        min_length=1,
        max_length=len(CALLBACK_STATUSES),
        description="The terminal statuses that trigger it; default all four.",
    )


class CallbackState(Callback):
    status: Literal["pending", "delivering", "delivered", "failed"] | None = Field(
        description="null until the run ends in one of `on`; then pending (due), delivering, delivered, "
        "or failed (every attempt failed)."
    )
    attempts: int = Field(description="Deliveries attempted so far.")
    last_error: str | None = Field(description="Why the latest failed attempt failed.")


async def validate_callback(raw: Any, *, field: str, allow_private: bool) -> dict[str, Any] | None:
    """The callback's normalized JSON form (None: none). `field` names it in errors (`callback`,
    `runs[3].callback`)."""
    if raw is None:
        return None
    try:
        callback = Callback.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        raise InvalidInput(f"{field}{where}: {err['msg']}", field=f"{field}{where}") from exc
    url = urlsplit(str(callback.url))
    if url.username or url.password:
        raise InvalidInput(f"{field}.url must not carry credentials", field=f"{field}.url")
    assert url.hostname is not None
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        await resolve_allowed(url.hostname, port, allow_private=allow_private, field=f"{field}.url")
    except UnicodeError as exc:  # the resolver's IDNA codec: a label over 63 characters, say
        raise InvalidInput(
            f"{field}.url has a host name that is not valid: {exc}", field=f"{field}.url"
        ) from None
    return {"url": str(callback.url), "on": list(dict.fromkeys(callback.on))}


async def with_delivery_state(conn: asyncpg.Connection, runs: Sequence[RunRecord]) -> None:
    """Fills in the delivery state of the runs that name a callback (one query, none when no run
    does): the latest obligation of each, since a run retried and ended again owes another."""
    named = [r for r in runs if r["callback"] is not None]
    if not named:
        return
    states = await callback_repo.delivery_states(conn, [r["id"] for r in named])
    for run in named:
        state, callback = states.get(run["id"]), run["callback"]
        if state is not None and callback is not None:
            callback |= {
                "status": state["status"],
                "attempts": state["attempts"],
                "last_error": state["last_error"],
            }
