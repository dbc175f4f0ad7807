"""Runs a worker fetched but may not start yet (their tenant is over its share of the slots): held
per tenant, oldest first, each findable by run id."""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from uuid import UUID

from app.worker.delivery import Delivery


class HeldRuns:
    def __init__(self) -> None:
        self._by_tenant: dict[str, collections.deque[Delivery]] = {}
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
        self._by_tenant.setdefault(d.tenant, collections.deque()).append(d)
        self._by_id[d.run.run_id] = d

    def remove(self, d: Delivery) -> None:
        if self._by_id.pop(d.run.run_id, None) is not None:
            queue = self._by_tenant[d.tenant]
            queue.remove(d)
            if not queue:
                del self._by_tenant[d.tenant]

    def oldest(self, tenant: str) -> Delivery:
        d = self._take(tenant, collections.deque.popleft)
        del self._by_id[d.run.run_id]
        return d

    def newest_of_heaviest(self, load: Callable[[str], int]) -> Delivery:
        """The newest held run of the tenant with the most runs, running (`load`) and held."""
        heaviest = max(self._by_tenant, key=lambda t: load(t) + len(self._by_tenant[t]))
        d = self._take(heaviest, collections.deque.pop)
        del self._by_id[d.run.run_id]
        return d

    def clear(self) -> None:
        self._by_tenant.clear()
        self._by_id.clear()

    def _take(self, tenant: str, how: Callable[[collections.deque[Delivery]], Delivery]) -> Delivery:
        queue = self._by_tenant[tenant]
        d = how(queue)
        if not queue:  # a tenant with nothing held is not listed: tenants() names only waiting ones
            del self._by_tenant[tenant]
        return d
