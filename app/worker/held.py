"""Runs a worker fetched but may not start yet (their tenant is over its share of the slots): held
per tenant, urgent-lane runs before the rest and oldest first within each, each findable by run id.
Without the lanes here, a tenant's urgent run that arrived while the worker was full waited behind
every run of that tenant held before it, which undid what the urgent lane bought it."""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from uuid import UUID

from app.worker.delivery import Delivery

URGENT, NORMAL = 0, 1  # a tenant's queues, in the order their runs start


class HeldRuns:
    def __init__(self) -> None:
        self._by_tenant: dict[str, tuple[collections.deque[Delivery], ...]] = {}
        self._by_id: dict[UUID, Delivery] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, d: Delivery) -> bool:
        return d.run.run_id in self._by_id

    def __iter__(self) -> Iterator[Delivery]:
        return iter(list(self._by_id.values()))

    def get(self, run_id: UUID) -> Delivery | None:
        return self._by_id.get(run_id)

    def tenants(self) -> list[str]:
        return list(self._by_tenant)

    def add(self, d: Delivery) -> None:
        queues = self._by_tenant.setdefault(d.tenant, (collections.deque(), collections.deque()))
        queues[URGENT if d.urgent else NORMAL].append(d)
        self._by_id[d.run.run_id] = d

    def remove(self, d: Delivery) -> None:
        if self._by_id.pop(d.run.run_id, None) is not None:
            queues = self._by_tenant[d.tenant]
            queues[URGENT if d.urgent else NORMAL].remove(d)
            if not any(queues):
                del self._by_tenant[d.tenant]

    def next_to_start(self, tenant: str) -> Delivery:
        """The tenant's oldest urgent run, else its oldest other run."""
        queues = self._by_tenant[tenant]
        return self._take(tenant, queues[URGENT] or queues[NORMAL], collections.deque.popleft)

    def newest_of_heaviest(self, load: Callable[[str], int]) -> Delivery:
        """The newest held run of the tenant with the most runs, running (`load`) and held; its
        urgent runs go last."""
        heaviest = max(self._by_tenant, key=lambda t: load(t) + sum(map(len, self._by_tenant[t])))
        queues = self._by_tenant[heaviest]
        return self._take(heaviest, queues[NORMAL] or queues[URGENT], collections.deque.pop)

    def clear(self) -> None:
        self._by_tenant.clear()
        self._by_id.clear()

    def _take(
        self,
        tenant: str,
        queue: collections.deque[Delivery],
        how: Callable[[collections.deque[Delivery]], Delivery],
    ) -> Delivery:
        d = how(queue)
        del self._by_id[d.run.run_id]
        if not any(self._by_tenant[tenant]):  # tenants() names only tenants with runs held
            del self._by_tenant[tenant]
        return d
