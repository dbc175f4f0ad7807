"""The engine's side of wake-ups: LISTEN on the due channel (app.db.wakeups) on one pooled
connection. A notification wakes the claim loop and widens its claim bounds to hold the run's
scheduled_at (lowers the floor for an older run, raises the ceiling for one pulled forward)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime
from typing import Any

import asyncpg

from app.background import sleep_or_stop
from app.db import wakeups
from app.db.errors import DB_ERRORS
from app.engine.floor import ClaimBounds

log = logging.getLogger(__name__)


class DueListener:
    def __init__(self, pool: asyncpg.Pool, bounds: ClaimBounds):
        self.pool = pool
        self.bounds = bounds
        self.wake = asyncio.Event()
        self._also_wake: list[asyncio.Event] = []
        self._conn: asyncpg.Connection | None = None

    def another_wake(self) -> asyncio.Event:
        """One more event set by every notification, for a second loop that clears it on its own."""
        event = asyncio.Event()
        self._also_wake.append(event)
        return event

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        with contextlib.suppress(ValueError):
            self.bounds.include(datetime.fromisoformat(payload))
        self.wake.set()
        for event in self._also_wake:
            event.set()

    async def listening(self, stop: asyncio.Event) -> bool:
        """True while the connection listens. Otherwise (re)connects and answers False, so the
        caller checks `stop` again first; after a failure it has waited a second."""
        if self._conn is not None and not _is_closed(self._conn):
            return True
        await self.close()  # give a dead connection's slot back, or the pool shrinks
        conn: asyncpg.Connection | None = None
        try:
            conn = await self.pool.acquire()
            await wakeups.listen(conn, self._on_notify)
            self._conn = conn
        except DB_ERRORS as exc:
            if conn is not None:  # acquired but could not listen: not ours to keep
                await self._release(conn)
            log.warning("dispatch: cannot listen: %s; retrying", exc)
            await sleep_or_stop(stop, 1.0)
        return False

    async def close(self) -> None:
        """Never raises: it runs on the way out of a database error, where one more would kill the loop."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._release(conn)

    async def _release(self, conn: asyncpg.Connection) -> None:
        with contextlib.suppress(Exception):  # the connection may already be gone
            await wakeups.unlisten(conn, self._on_notify)
        try:
            await self.pool.release(conn)
        except DB_ERRORS as exc:  # a broken connection fails its reset; the pool terminates it
            log.debug("dispatch: releasing the listener: %s", exc)


def _is_closed(conn: asyncpg.Connection) -> bool:
    # When the server drops a connection (a Postgres restart), asyncpg may hand it back to the pool
    # by itself, and every call on the released proxy raises InterfaceError, is_closed() included:
    # unguarded, a Postgres restart would end the dispatcher, and with it the engine.
    try:
        return bool(conn.is_closed())
    except asyncpg.InterfaceError:
        return True
