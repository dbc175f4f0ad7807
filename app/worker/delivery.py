"""One message a worker received, and what became of it."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from nats.aio.msg import Msg

from app.bus.message import RunMessage, UnknownVersion
from app.domain import NO_RESULT, StoredResult
from app.services.validation import MAX_ERROR_CHARS, storable_text

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Delivery:
    msg: Msg
    run: RunMessage
    attempt: int = 0
    ok: bool = False
    error: str | None = None
    # The rest of the attempt's history entry and the run's result (finish_runs records them).
    timed_out: bool = False
    http_status: int | None = None
    retry_after: float | None = None  # seconds a 429/503 asked for, already bounded
    result: StoredResult = NO_RESULT
    # Until when (time.monotonic) the run's lease is surely held: the lease was set by a statement
    # sent no earlier than `lease_seconds` before this. Past it, the reaper may have given the run
    # to another worker, so its target must not be called any more (a frozen process wakes late).
    lease_until: float = 0.0
    urgent: bool = False  # fetched from the urgent lane: started before the tenant's other held runs

    def fence(self) -> tuple[Any, Any, int]:
        return (self.run.run_id, self.run.scheduled_at, self.run.epoch)

    @property
    def tenant(self) -> str:
        return self.run.tenant_id

    @property
    def inline(self) -> bool:
        """Nothing to execute: the start statement records the outcome too."""
        return self.run.target.get("type") == "noop"

    @property
    def outcome(self) -> str:
        """The attempt's outcome in its history entry."""
        return "succeeded" if self.ok else "timed_out" if self.timed_out else "failed"

    def succeed(self, result: StoredResult = NO_RESULT) -> None:
        self.ok = True
        self.result = result

    def fail(
        self,
        error: str,
        *,
        timed_out: bool = False,
        http_status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        """The error is the target's answer or a handler's message: bounded and made storable here,
        the one door through which it reaches the run's last_error and its attempt entry."""
        self.ok = False
        self.error = storable_text(error, MAX_ERROR_CHARS)
        self.timed_out = timed_out
        self.http_status = http_status
        self.retry_after = retry_after
        self.result = NO_RESULT


async def quietly(awaitable: object) -> None:
    """Acks and naks are best effort: a lost ack means a redelivery, which the epoch fence drops."""
    try:
        await awaitable  # type: ignore[misc]
    except Exception as exc:
        log.debug("nats ack/nak failed: %s", exc)


async def received(msg: Msg, *, urgent: bool = False) -> Delivery | None:
    """The delivery a message carries, or None for one this worker cannot take: a newer message
    version is nak'ed for a newer replica, a malformed message is terminated."""
    try:
        return Delivery(msg, RunMessage.decode(msg.data), urgent=urgent)
    except UnknownVersion:
        await quietly(msg.nak(delay=5))
    except (ValueError, KeyError, TypeError):
        log.error("dropping a malformed message on %s", msg.subject)
        await quietly(msg.term())
    return None
