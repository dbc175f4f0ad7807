"""Tenants' shares of a worker's slots (app/worker/fairness.py)."""

from __future__ import annotations

from app.worker.fairness import TenantSlots


def fill(slots: TenantSlots, tenant: str, n: int) -> None:
    assert slots.assign({tenant: n}) == [tenant] * n


def test_a_tenant_alone_uses_every_slot_and_no_more() -> None:
    slots = TenantSlots(concurrency=8, share=0.25)
    assert slots.assign({"a": 20}) == ["a"] * 8
    assert slots.assign({"a": 1}) == []  # the reserve is not for a tenant over its share


def test_a_newcomer_starts_at_once_from_the_reserve_while_another_borrows() -> None:
    slots = TenantSlots(concurrency=8, share=0.25)
    assert (slots.share, slots.ceiling) == (2, 10)
    fill(slots, "a", 8)
    fill(slots, "b", 2)  # one share of its own, above the concurrency
    assert slots.assign({"a": 1, "b": 1, "c": 1}) == []  # the reserve is used up
    slots.give_back("b")
    assert slots.assign({"a": 1, "b": 1}) == ["b"]


def test_freed_slots_go_to_the_tenant_with_the_fewest_runs() -> None:
    slots = TenantSlots(concurrency=8, share=0.25)
    fill(slots, "a", 6)
    fill(slots, "b", 2)
    slots.give_back("a")
    slots.give_back("a")
    # b has 2, a 4: b's runs first until it catches up, then one each, a first on a tie (held first).
    assert slots.assign({"a": 5, "b": 5}) == ["b", "b"]
    slots.give_back("a")
    slots.give_back("b")
    assert slots.assign({"a": 5, "b": 5}) == ["a", "b"]  # 3 and 3: a first, then b (4 against 4)
    slots.give_back("b")
    assert slots.assign({"a": 1}) == ["a"]  # and a alone takes it: nothing idles while work waits


def test_no_reserve_without_borrowing() -> None:
    slots = TenantSlots(concurrency=4, share=0.5)
    fill(slots, "a", 2)
    fill(slots, "b", 2)  # full, but nobody is over their share
    assert slots.assign({"c": 1}) == []
    slots.give_back("a")
    assert "a" not in slots.running or slots.running["a"] == 1
    assert slots.assign({"c": 1}) == ["c"]


def test_slots_are_given_as_one_at_a_time_to_the_fewest_would_give_them() -> None:
    # Against the rule itself, slot by slot: many tenants, some already running, some borrowing.
    for concurrency, share in ((64, 0.25), (512, 0.25), (10, 0.5)):
        slots, reference = TenantSlots(concurrency, share), TenantSlots(concurrency, share)
        for tenant, n in (("t3", 5), ("t7", 2)):
            fill(slots, tenant, n)
            fill(reference, tenant, n)
        waiting = {f"t{i}": (i * 7) % 13 + 1 for i in range(40)}
        expected: list[str] = []
        left = dict(waiting)
        while left:
            tenant = min(left, key=lambda t: reference.running[t])  # first held on a tie
            if not reference.may_take(tenant):
                break
            reference.take(tenant)
            expected.append(tenant)
            left[tenant] -= 1
            if not left[tenant]:
                del left[tenant]
        given = slots.assign(waiting)
        assert given == expected
        assert slots.running == reference.running and slots.total == reference.total
        assert all(given.count(t) <= n for t, n in waiting.items())
        assert slots.total <= slots.ceiling
