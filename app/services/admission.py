"""Admission control: a tenant's submissions are refused once its pending backlog would pass the
quota (`SCHEDULER_TENANT_MAX_PENDING`), exactly within one API process and within a bounded
overshoot across them (docs/api.md: "Admission")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from app.errors import OverQuota


class AdmissionControl:
    """Refuses a tenant's submission once its pending backlog would pass the quota.

    Within one process the decision is exact: a request reserves its runs in the same step (no
    await between) as it compares count + reserved + adding with the quota, so concurrent requests
    cannot all pass on one stale figure (20 concurrent batches of 200 against a quota of 200 wrote
    800). The count is bounded (quota + 1 rows at most) and shared: it is taken again once it is
    older than `ttl_seconds` (a tenth of that past nine tenths of the quota), by one request while
    the others wait for it. So a flood costs a few counts per second per tenant, not one per
    request, and what one process admitted since the count is added in as it commits.

    Across API processes a count cannot see what the others admitted after it was taken: the
    overshoot is bounded by what the other processes admit for that tenant within one count's age
    (at most `ttl_seconds / 10` near the quota). It is a backlog bound, not a rate limit."""

    def __init__(self, max_pending: int, ttl_seconds: float = 1.0):
        self.max_pending = max_pending
        self.ttl_seconds = ttl_seconds
        self._backlogs: dict[str, _Backlog] = {}

    def ticket(self, tenant_id: str) -> Ticket:
        return Ticket(self, self._backlogs.setdefault(tenant_id, _Backlog()), tenant_id)

    def may_be_full(self, tenant_id: str) -> bool:
        """Whether the tenant's last count (however old) said its backlog is full."""
        backlog = self._backlogs.get(tenant_id)
        return backlog is not None and backlog.count + backlog.reserved >= self.max_pending

    async def known_full(
        self, tenant_id: str, count_pending: Callable[[int], Awaitable[int]]
    ) -> OverQuota | None:
        """The refusal, if the tenant's backlog is known to be full: its last count said no run fits
        and a count at most `ttl_seconds` old still says so (taken again when older, by one request
        while the others wait, as in `admit`). The route answers 429 without reading (and parsing) a
        body that would be refused anyway, so a full tenant's flood costs one count per TTL, not a
        parse per request: with the count trusted only while fresh, each 16 MiB batch arriving after
        it aged was parsed first (1.2-1.6 s of the event loop each). A tenant never counted, or
        below the quota at its last count, is not known full: its body is read."""
        backlog = self._backlogs.get(tenant_id)
        if backlog is None or not self.may_be_full(tenant_id):
            return None
        if backlog.counting is not None or time.monotonic() - backlog.counted_at > self.ttl_seconds:
            await self._count(backlog, count_pending)
        if backlog.count + backlog.reserved < self.max_pending:
            return None
        return _over_quota(tenant_id, backlog.count + backlog.reserved, self.max_pending)

    async def _count(self, backlog: _Backlog, count_pending: Callable[[int], Awaitable[int]]) -> None:
        """Takes the shared count again, or waits for the one another request is taking."""
        if backlog.counting is not None:  # another request is counting: its answer serves all
            await asyncio.shield(backlog.counting)
            return
        backlog.counting = asyncio.get_running_loop().create_future()
        try:
            # The runs this process is inserting settle first (no new ones are admitted while a
            # count is due), so the count sees each of them once: in the database, not also in
            # `reserved`. Counted mid-insert, a run committed but not yet settled was counted
            # twice and the tenant refused below its quota (9 of 10 admitted, under load).
            await backlog.idle.wait()
            fresh = await count_pending(self.max_pending + 1)
            backlog.count, backlog.counted_at = fresh, time.monotonic()
        finally:
            backlog.counting.set_result(None)
            backlog.counting = None

    def _fresh_enough(self, backlog: _Backlog, adding: int) -> bool:
        age = time.monotonic() - backlog.counted_at
        # Near the quota a stale count matters; far from it, counting often would only cost.
        near = (backlog.count + backlog.reserved + adding) * 10 > self.max_pending * 9
        return age <= (self.ttl_seconds / 10 if near else self.ttl_seconds)


def _set_event() -> asyncio.Event:
    event = asyncio.Event()
    event.set()
    return event


@dataclass
class _Backlog:
    count: int = 0  # pending at the last count, plus what this process admitted and committed since
    counted_at: float = float("-inf")
    reserved: int = 0  # admitted by this process, not yet committed or abandoned
    counting: asyncio.Future[None] | None = None
    idle: asyncio.Event = field(default_factory=_set_event)  # set while nothing is reserved


class Ticket:
    """One request's admission: `admit` reserves, then exactly one of `committed` (the runs exist)
    or `release` (nothing was written) settles the reservation."""

    def __init__(self, control: AdmissionControl, backlog: _Backlog, tenant_id: str):
        self._control = control
        self._backlog = backlog
        self._tenant_id = tenant_id
        self._reserved = 0

    async def admit(self, count_pending: Callable[[int], Awaitable[int]], adding: int) -> None:
        """Reserves `adding` runs, or raises OverQuota. `count_pending(limit)` counts the tenant's
        pending runs (up to `limit`): called only when the shared count is too old."""
        control, backlog = self._control, self._backlog
        if backlog.counting is not None or not control._fresh_enough(backlog, adding):
            await control._count(backlog, count_pending)
        # From here to the reservation nothing awaits: the check and the reservation are one step.
        pending = backlog.count + backlog.reserved
        if pending + adding > control.max_pending:
            raise _over_quota(self._tenant_id, pending, control.max_pending)
        backlog.reserved += adding
        self._reserved += adding
        if backlog.reserved:
            backlog.idle.clear()

    def committed(self, written: int | None = None) -> None:
        """`written`: the runs the request made, when fewer than it reserved (a duplicate of a
        unique job's run makes none)."""
        self._backlog.count += self._reserved if written is None else min(written, self._reserved)
        self.release()

    def release(self) -> None:
        self._backlog.reserved -= self._reserved
        self._reserved = 0
        if not self._backlog.reserved:
            self._backlog.idle.set()


def _over_quota(tenant_id: str, pending: int, max_pending: int) -> OverQuota:
    return OverQuota(
        f"tenant {tenant_id!r} has {pending} pending runs; the backlog quota is {max_pending}",
        field="tenant_id",
        headers={"Retry-After": "5"},
    )
