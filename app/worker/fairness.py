"""Each tenant's share of a worker's slots.

Without it, one tenant's hanging webhooks (timeouts up to an hour) held every slot of every worker,
and another tenant's runs waited behind them. A running webhook cannot be preempted, so fairness
is decided when a slot is given:

- A free slot goes to the waiting tenant with the fewest runs on this worker (max-min fairness).
  A tenant alone therefore still uses all `concurrency` slots: nothing is idle while work waits.
- Each tenant's share is ceil(share * concurrency) slots. A tenant beyond its share is borrowing,
  and while anyone borrows, tenants under their share may also use a reserve of one share on top
  of `concurrency`: a tenant that arrives while another fills the worker with runs that hang starts
  at once, without waiting for those runs to end. So a worker runs at most concurrency + one share
  at once, and that only while one tenant borrows.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter


class TenantSlots:
    def __init__(self, concurrency: int, share: float):
        self.concurrency = concurrency
        self.share = max(1, math.ceil(share * concurrency))
        self.running: Counter[str] = Counter()
        self.total = 0

    @property
    def borrowed(self) -> int:
        return sum(n - self.share for n in self.running.values() if n > self.share)

    @property
    def ceiling(self) -> int:
        """The most this worker ever runs at once: its concurrency and one share of reserve."""
        return self.concurrency + self.share

    def may_take(self, tenant: str) -> bool:
        if self.total < self.concurrency:
            return True
        return self.running[tenant] < self.share and self.borrowed > 0 and self.total < self.ceiling

    def assign(self, waiting: dict[str, int]) -> list[str]:
        """Gives free slots to waiting runs (tenant -> how many wait), one at a time, each to the
        waiting tenant with the fewest runs on this worker (the first waiting on a tie), for as long
        as that tenant may take one; the tenants in the order their slots were given. One heap for
        them all: a scan of every waiting tenant for each slot cost 512 slots over 1,000 waiting
        tenants half a million looks, and a few microseconds a run over 50 (py-spy)."""
        # (its runs on this worker, its place among the waiting, the tenant, its runs still waiting)
        heap = [(self.running[tenant], i, tenant, n) for i, (tenant, n) in enumerate(waiting.items())]
        heapq.heapify(heap)
        given: list[str] = []
        while heap and self.may_take(tenant := heap[0][2]):
            self.take(tenant)
            given.append(tenant)
            _, place, _, left = heap[0]
            if left > 1:
                heapq.heapreplace(heap, (self.running[tenant], place, tenant, left - 1))
            else:
                heapq.heappop(heap)
        return given

    def take(self, tenant: str) -> None:
        self.running[tenant] += 1
        self.total += 1

    def give_back(self, tenant: str) -> None:
        self.running[tenant] -= 1
        self.total -= 1
        if self.running[tenant] <= 0:
            del self.running[tenant]
