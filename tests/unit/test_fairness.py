"""Tenants' shares of a worker's slots (app/worker/fairness.py)."""

from __future__ import annotations

from app.worker.fairness import TenantSlots


def fill(slots: TenantSlots, tenant: str, n: int) -> None:
    for _ in range(n):
        assert slots.pick([tenant]) == tenant
        slots.take(tenant)


def test_a_tenant_alone_uses_every_slot_and_no_more() -> None:
    slots = TenantSlots(concurrency=8, share=0.25)
    fill(slots, "a", 8)
    assert slots.pick(["a"]) is None  # the reserve is not for a tenant over its share


def test_a_newcomer_starts_at_once_from_the_reserve_while_another_borrows() -> None:
    slots = TenantSlots(concurrency=8, share=0.25)
    assert (slots.share, slots.ceiling) == (2, 10)
    fill(slots, "a", 8)
    fill(slots, "b", 2)  # one share of its own, above the concurrency
    assert slots.pick(["a", "b", "c"]) is None  # the reserve is used up
    slots.give_back("b")
    assert slots.pick(["a", "b"]) == "b"


def test_freed_slots_go_to_the_tenant_with_the_fewest_runs() -> None:
    slots = TenantSlots(concurrency=8, share=0.25)
    fill(slots, "a", 6)
    fill(slots, "b", 2)
    slots.give_back("a")
    assert slots.pick(["a", "b"]) == "b"  # 2 < 5
    assert slots.pick(["a"]) == "a"  # and a alone takes it: nothing idles while work waits


def test_no_reserve_without_borrowing() -> None:
    slots = TenantSlots(concurrency=4, share=0.5)
    fill(slots, "a", 2)
    fill(slots, "b", 2)  # full, but nobody is over their share
    assert slots.pick(["c"]) is None
    slots.give_back("a")
    assert "a" not in slots.running or slots.running["a"] == 1
    assert slots.pick(["c"]) == "c"
