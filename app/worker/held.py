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

    def waiting(self) -> dict[str, int]:
        """Runs held per tenant, tenants in the order they were first held."""
        return {tenant: len(urgent) + len(normal) for tenant, (urgent, normal) in self._by_tenant.items()}

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

    def newest_message_of_heaviest(self, load: Callable[[str], int]) -> list[Delivery]:
        """The runs of the newest message held whole (none of its runs started or done) of the
        tenant with the most runs, running (`load`) and held, its urgent runs last; the next
        heaviest tenant's if that one has none. A message goes back to the stream whole: handing back
        part of one brought back, with the redelivery, the runs of it already done.
        Empty when no message is held whole."""
        for tenant in sorted(
            self._by_tenant, key=lambda t: load(t) + sum(map(len, self._by_tenant[t])), reverse=True
        ):
            for queue in reversed(self._by_tenant[tenant]):  # NORMAL, then URGENT
                for d in reversed(queue):
                    parts = [x for x in queue if x.msg.message is d.msg.message]
                    if len(parts) == d.msg.parts:
                        for x in parts:
                            self.remove(x)
                        return parts
        return []

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
        if not any(self._by_tenant[tenant]):  # waiting() names only tenants with runs held
            del self._by_tenant[tenant]
        return d
