"""Wake-ups: the NOTIFY that tells idle engines runs are due, and the LISTEN that hears it.

Every wake-up goes through this channel: a submission's insert NOTIFYs in its own statement
(insert_runs, when app.services.wakeups decides it should), the cron materializer with
notify_runs_due in its transaction, a retry (retry_runs) and a reschedule (reschedule_run) in their
statement, and the dispatcher listens. The payload is a due run's scheduled_at, which the engines'
claim bounds then hold (app.engine.floor)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import asyncpg

from app.db import queries as q

DUE_CHANNEL = "scheduler_runs_due"

Listener = Callable[[Any, int, str, str], None]  # asyncpg's (connection, pid, channel, payload)


async def notify_runs_due(conn: asyncpg.Connection, floor: datetime) -> None:
    """Delivered at the commit of the caller's transaction (at once outside one)."""
    await q.execute(conn, "notify_runs_due", channel=DUE_CHANNEL, floor=floor.isoformat())


async def listen(conn: asyncpg.Connection, listener: Listener) -> None:
    await conn.add_listener(DUE_CHANNEL, listener)


async def unlisten(conn: asyncpg.Connection, listener: Listener) -> None:
    await conn.remove_listener(DUE_CHANNEL, listener)
