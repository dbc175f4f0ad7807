"""Delivering completion callbacks from the outbox (run_callbacks, migration 0008).

A deliverer claims due callbacks (and ones whose claim lapsed: a worker killed mid-delivery leaves
its claims to lapse, and another takes them under a new epoch), POSTs each run, as GET /runs/{id}
answers it, inside a Standard Webhooks envelope signed like a webhook, and records the outcome in one
fenced statement. At least once: a delivery the receiver got but whose outcome was not recorded is
sent again; receivers dedupe on `webhook-id`, the same on every attempt of one callback.

A receiver is hostile like a target: its host is resolved and checked before every attempt, the
request goes to the address that passed, redirects are not followed, at most a few bytes of its answer
are read, and one attempt takes `callback_timeout_seconds` in all, however slowly it dribbles. A
tenant delivers at most `callback_tenant_concurrency` at once, so a receiver that hangs holds its own
share of the slots, never another tenant's. None of it touches the run: its outcome is recorded.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx

from app.background import AGAIN, Periodic, Wait
from app.config import Settings
from app.db import callbacks as callback_repo
from app.db.errors import DB_ERRORS
from app.domain import dump_json
from app.errors import InvalidInput, NotFound
from app.services import groups as group_service
from app.services import runs as run_service
from app.services.signing import signature_header
from app.services.validation import MAX_ERROR_CHARS, storable_text
from app.telemetry import metrics
from app.worker.signing_keys import SigningKeys, UnknownTenant
from app.worker.targets import MAX_ERROR_BODY, RESPONSE_EXCERPT_BYTES, pin, send_bounded

log = logging.getLogger(__name__)


class CallbackFailed(Exception):
    """This attempt failed for a reason worth retrying (the answer, the network, the timeout)."""


class CallbackDeliverer(Periodic):
    """A service (app/background.py): claims what it has room for every CALLBACK_POLL_SECONDS, at
    once when a delivery ends, and again at once while claims fill its room. At stop, the deliveries
    in flight are cut: their claims lapse and another deliverer takes them."""

    name = "callbacks"
    jitter = 0.0
    wake: asyncio.Event

    def __init__(self, settings: Settings, pool: asyncpg.Pool, signing_keys: SigningKeys):
        self.settings = settings
        self.pool = pool
        self.signing_keys = signing_keys
        self.interval = settings.callback_poll_seconds
        # A claim outlives its attempt (bounded by the timeout) with room to record the outcome; one
        # whose outcome comes later still is delivered again, never recorded twice (the fence).
        self.lease_seconds = 2 * settings.callback_timeout_seconds + 1
        self.http = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=settings.callback_concurrency),
            headers={"Accept-Encoding": "identity"},
        )
        self.busy: Counter[str] = Counter()  # tenant -> deliveries in flight
        self.tasks: set[asyncio.Task[None]] = set()
        self.wake = asyncio.Event()  # a delivery ended: room for another

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()  # its claim lapses and another deliverer takes it
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.http.aclose()

    async def run(self, stop: asyncio.Event) -> None:
        try:
            await super().run(stop)
        finally:
            await self.close()

    async def step(self) -> Wait | None:
        claimed = await self.run_once()
        return AGAIN if claimed and len(self.tasks) < self.settings.callback_concurrency else None

    async def run_once(self) -> int:
        """Claims what this deliverer has room for and starts delivering it; how many."""
        room = self.settings.callback_concurrency - len(self.tasks)
        if room <= 0:
            return 0
        async with self.pool.acquire() as conn:
            rows = await callback_repo.claim_callbacks(
                conn,
                busy=dict(self.busy),
                per_tenant=self.settings.callback_tenant_concurrency,
                limit=room,
                owner=self.settings.owner,
                lease_seconds=self.lease_seconds,
            )
        for row in rows:
            self.busy[row["tenant_id"]] += 1
            task = asyncio.create_task(self.deliver(row))
            self.tasks.add(task)
            task.add_done_callback(functools.partial(self._done, tenant=row["tenant_id"]))
        return len(rows)

    def _done(self, task: asyncio.Task[None], *, tenant: str) -> None:
        self.tasks.discard(task)
        self.busy[tenant] -= 1
        if self.busy[tenant] <= 0:
            del self.busy[tenant]
        self.wake.set()

    async def deliver(self, row: asyncpg.Record) -> None:
        s = self.settings
        error: str | None = None
        try:
            async with asyncio.timeout(s.callback_timeout_seconds):
                await self._post(row)
        except TimeoutError:
            error = f"timed out after {s.callback_timeout_seconds:g}s"
        except (CallbackFailed, InvalidInput, NotFound) as exc:
            error = str(exc)
        except (httpx.HTTPError, OSError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # a bug: this callback fails alone, the deliverer goes on
            log.exception("callback %s of run %s", row["id"], row["run_id"])
            metrics.unexpected_errors_total.labels("callback").inc()
            error = f"{type(exc).__name__}: {exc}"
        try:
            async with self.pool.acquire() as conn:
                status = await callback_repo.finish_callback(
                    conn,
                    id=row["id"],
                    epoch=row["epoch"],
                    ok=error is None,
                    error=None if error is None else storable_text(error, MAX_ERROR_CHARS),
                    max_attempts=s.callback_max_attempts,
                    backoff_seconds=s.callback_backoff_seconds,
                    max_backoff_seconds=s.callback_max_backoff_seconds,
                )
        except DB_ERRORS as exc:
            # Its claim lapses and the callback is delivered again: at least once.
            log.warning("recording callback %s: %s", row["id"], exc)
            return
        if status == "delivered":
            metrics.callbacks_delivered_total.inc()
        elif status is not None:
            metrics.callbacks_failed_total.labels("final" if status == "failed" else "retry").inc()

    async def _post(self, row: asyncpg.Record) -> None:
        # A group's callback (app.engine.groups) carries the group; a run's, the run.
        group_id = row["group_id"]
        data: Any
        if group_id is not None:
            data = await group_service.get_group(self.pool, row["tenant_id"], group_id)
            kind, subject, id_header = "group.completed", group_id, "Scheduler-Group-Id"
        else:
            data = await run_service.get_run(self.pool, row["run_id"], row["tenant_id"])
            kind, subject, id_header = "run.completed", row["run_id"], "Scheduler-Run-Id"
        try:
            keys = await self.signing_keys.get(row["tenant_id"])
        except UnknownTenant:
            raise CallbackFailed(f"tenant {row['tenant_id']!r} no longer exists") from None
        timestamp = int(time.time())
        body = dump_json(
            {
                "type": kind,
                "timestamp": datetime.fromtimestamp(timestamp, UTC),
                "data": data,
            }
        )
        msg_id = f"{subject}.callback.{row['id']}"
        target = await pin(row["url"], self.settings.allow_private_targets, field="callback.url")
        headers: dict[str, Any] = {
            "Host": target.host,
            "Content-Type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": signature_header(keys, msg_id, timestamp, body),
            id_header: str(subject),
            "Scheduler-Callback-Attempt": str(row["attempts"]),
        }
        request = self.http.build_request(
            "POST",
            target.url,
            content=body,
            headers=headers,
            timeout=self.settings.callback_timeout_seconds,
            extensions=target.extensions,
        )
        # A receiver's answer is not kept: only a failure's excerpt, for last_error.
        answer = await send_bounded(self.http, request, lambda status: RESPONSE_EXCERPT_BYTES)
        if not 200 <= answer.status < 300:
            text = answer.body.decode("utf-8", errors="replace")[:MAX_ERROR_BODY]
            raise CallbackFailed(f"HTTP {answer.status}: {text}")
