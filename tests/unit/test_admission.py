"""AdmissionControl without a database: the count is a function here, the rules are the service's."""

from __future__ import annotations

import asyncio

import pytest

from app.errors import OverQuota
from app.services.admission import AdmissionControl


class Counter:
    """What the tenant's backlog holds in Postgres, and how often it was counted."""

    def __init__(self, pending: int, delay: float = 0.0):
        self.pending = pending
        self.delay = delay
        self.calls = 0

    async def __call__(self, limit: int) -> int:
        self.calls += 1
        await asyncio.sleep(self.delay)
        return min(self.pending, limit)


async def test_admits_up_to_the_quota_and_refuses_past_it() -> None:
    control = AdmissionControl(max_pending=10)
    count = Counter(pending=7)
    await control.ticket("a").admit(count, 3)
    with pytest.raises(OverQuota) as refused:
        await control.ticket("a").admit(count, 1)
    assert refused.value.field == "tenant_id" and refused.value.headers == {"Retry-After": "5"}
    await control.ticket("b").admit(Counter(pending=0), 10)  # another tenant's quota is its own


async def test_concurrent_requests_reserve_in_the_same_step_as_they_check() -> None:
    control = AdmissionControl(max_pending=200)
    count = Counter(pending=0, delay=0.01)

    async def one() -> bool:
        try:
            await control.ticket("a").admit(count, 50)
        except OverQuota:
            return False
        return True

    admitted = await asyncio.gather(*(one() for _ in range(20)))
    assert sum(admitted) == 4  # 4 x 50 = the quota, not 20 x 50 on one stale figure
    assert count.calls == 1  # one count, shared by every request waiting for it


async def test_release_gives_back_and_committed_counts() -> None:
    control = AdmissionControl(max_pending=10, ttl_seconds=60)
    count = Counter(pending=0)
    abandoned = control.ticket("a")
    await abandoned.admit(count, 10)
    abandoned.release()  # nothing written: the reservation goes
    kept = control.ticket("a")
    await kept.admit(count, 6)
    kept.committed()
    kept.release()  # a no-op once committed
    assert await control.known_full("a", count) is None
    await control.ticket("a").admit(count, 4)  # 6 committed + 4 = the quota
    refusal = await control.known_full("a", count)
    assert isinstance(refusal, OverQuota) and refusal.field == "tenant_id"
    assert count.calls == 1  # within the TTL, far from the quota, nothing was counted again


async def test_near_the_quota_a_count_is_taken_again_sooner() -> None:
    control = AdmissionControl(max_pending=100, ttl_seconds=0.5)
    count = Counter(pending=0)
    for _ in range(2):
        ticket = control.ticket("a")
        await ticket.admit(count, 10)
        ticket.committed()  # written: a count waits for unsettled runs (see the last test)
        await asyncio.sleep(0.06)  # past a tenth of the TTL, within the TTL
    assert count.calls == 1  # far from the quota: the count still serves
    count.pending = 95  # other processes filled the backlog meanwhile
    with pytest.raises(OverQuota):
        await control.ticket("a").admit(count, 80)  # 20 + 80 > 90: near it, so counted again
    assert count.calls == 2


async def test_known_full_needs_a_count_first() -> None:
    count = Counter(pending=5)
    assert await AdmissionControl(max_pending=0).known_full("never-counted", count) is None
    assert count.calls == 0  # a tenant not known to be full costs no count


async def test_a_full_tenant_stays_known_full_after_its_count_ages_at_one_count_per_ttl() -> None:
    # Trusted only while fresh, an aged count let every later large batch of a full tenant be read
    # and parsed before its 429 (a second of the event loop each).
    control = AdmissionControl(max_pending=5, ttl_seconds=0.05)
    count = Counter(pending=5)
    with pytest.raises(OverQuota):
        await control.ticket("a").admit(count, 1)
    await asyncio.sleep(0.06)  # the count is older than its TTL
    refusals = await asyncio.gather(*(control.known_full("a", count) for _ in range(10)))
    assert all(isinstance(r, OverQuota) for r in refusals)
    assert count.calls == 2  # counted again once, for all ten
    count.pending = 2  # the backlog drained meanwhile
    await asyncio.sleep(0.06)
    assert await control.known_full("a", count) is None  # no longer full: the body is read
    assert not control.may_be_full("a")


async def test_a_count_waits_for_runs_being_inserted_so_none_is_counted_twice() -> None:
    # A's run is committed in the database but A has not settled yet when B's count is due: counted
    # then, it would stand both in the count and in A's reservation, and B be refused below the quota.
    control = AdmissionControl(max_pending=2, ttl_seconds=0.001)
    count = Counter(pending=0)
    a = control.ticket("a")
    await a.admit(count, 1)
    count.pending = 1  # A's INSERT committed
    await asyncio.sleep(0.01)  # A's count is stale: B counts again
    b = asyncio.create_task(control.ticket("a").admit(count, 1))
    await asyncio.sleep(0.01)
    assert not b.done()  # B's count waits for A to settle
    a.committed()
    await b  # 1 pending + 1 = the quota: admitted
