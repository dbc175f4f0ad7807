"""A run a worker received (one of those a message carried), and what became of it."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from nats.aio.msg import Msg

from app.bus.message import RunMessage, UnknownVersion, decode
from app.domain import NO_RESULT, StoredResult
from app.services.validation import MAX_ERROR_CHARS, storable_text

log = logging.getLogger(__name__)


class _Shared:
    """A message and what its runs' parts answered so far."""

    __slots__ = ("again", "delay", "left", "msg", "parts")

    def __init__(self, msg: Msg, parts: int):
        self.msg = msg
        self.parts = parts
        self.left = parts
        self.again = False  # some run was handed back: the message is to be redelivered
        self.delay: float | None = None  # the shortest delay a hand-back asked for (None: none)


class Part:
    """One run's share of the message that carried it. The worker answers for each run as if it
    were the message (ack, nak, term); the message is answered once every run is: acked when every
    run is done with, nak'ed (with the shortest delay asked) when any was handed back. A redelivery
    also carries the runs that were done meanwhile: the fence finds nothing to start for them and
    they are dropped, as any duplicate is. A part answers once."""

    __slots__ = ("_answered", "_shared")

    def __init__(self, shared: _Shared):
        self._shared = shared
        self._answered = False

    @classmethod
    def split(cls, msg: Msg, runs: int) -> list[Part]:
        """The parts of a message that carries `runs` runs."""
        shared = _Shared(msg, runs)
        return [cls(shared) for _ in range(runs)]

    @classmethod
    def alone(cls, msg: Msg) -> Part:
        """The part of a message that carries one run."""
        return cls.split(msg, 1)[0]

    @property
    def message(self) -> object:
        """Which message this is a part of (the same object for every part of it)."""
        return self._shared

    @property
    def parts(self) -> int:
        """How many runs the message carries."""
        return self._shared.parts

    async def ack(self) -> None:
        await self._answer(again=False)

    async def term(self) -> None:
        """This run is left to the lease reaper; the message's other runs are not."""
        await self._answer(again=False)

    async def nak(self, delay: float | None = None) -> None:
        await self._answer(again=True, delay=delay)

    async def in_progress(self) -> None:
        await self._shared.msg.in_progress()

    async def _answer(self, *, again: bool, delay: float | None = None) -> None:
        if self._answered:
            return
        self._answered = True
        shared = self._shared
        shared.left -= 1
        if again:
            shared.delay = delay if not shared.again else _shorter(shared.delay, delay)
            shared.again = True
        if shared.left == 0:
            if shared.again:
                await shared.msg.nak(delay=shared.delay)
            else:
                await shared.msg.ack()


def _shorter(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else min(a, b)


@dataclass(eq=False)
class Delivery:
    msg: Part
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
    # Its run was cancelled while it ran (app/worker/cancels.py): Postgres closed the attempt, its
    # task is cancelled and nothing of it is recorded.
    stopped: bool = False

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

    def succeed(self, result: StoredResult = NO_RESULT, http_status: int | None = None) -> None:
        self.ok = True
        self.result = result
        self.http_status = http_status

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


async def received(msg: Msg, *, urgent: bool = False) -> list[Delivery]:
    """The runs a message carries, one delivery each; none for a message this worker cannot take: a
    newer message version is nak'ed for a newer replica, a malformed message is terminated."""
    try:
        runs = decode(msg.data)
    except UnknownVersion:
        await quietly(msg.nak(delay=5))
        return []
    except ValueError:  # orjson's decode error is one too
        log.error("dropping a malformed message on %s", msg.subject)
        await quietly(msg.term())
        return []
    return [
        Delivery(part, run, urgent=urgent) for part, run in zip(Part.split(msg, len(runs)), runs, strict=True)
    ]
