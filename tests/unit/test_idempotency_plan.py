"""Idempotency planning: which requests of a submission create a run and which replay one."""

from __future__ import annotations

import pytest

from app.errors import InvalidInput
from app.services.run_requests import RunRequest, creating, first_uses


def _requests(*specs: tuple[str | None, object]) -> tuple[list[RunRequest], list[str]]:
    requests = [
        RunRequest(job="j", scheduled_at=None, payload=payload, idempotency_key=key, field=f"runs[{i}].")
        for i, (key, payload) in enumerate(specs)
    ]
    return requests, [r.body_hash() for r in requests]


def test_without_keys_every_request_creates() -> None:
    requests, hashes = _requests((None, 1), (None, 1))
    assert first_uses(requests, hashes) == {}
    assert creating(requests, hashes, {}, {}) == [0, 1]


def test_a_key_repeated_with_the_same_body_creates_once() -> None:
    requests, hashes = _requests(("k", 1), (None, 2), ("k", 1), ("m", 3))
    first = first_uses(requests, hashes)
    assert first == {"k": 0, "m": 3}
    assert creating(requests, hashes, first, {}) == [0, 1, 3]


def test_a_key_repeated_with_another_body_is_refused_naming_the_later_one() -> None:
    requests, hashes = _requests(("k", 1), ("k", 2))
    with pytest.raises(InvalidInput) as refused:
        first_uses(requests, hashes)
    assert refused.value.field == "runs[1].idempotency_key"


def test_a_key_used_earlier_replays() -> None:
    requests, hashes = _requests(("k", 1), ("new", 2), (None, 3))
    first = first_uses(requests, hashes)
    assert creating(requests, hashes, first, {"k": hashes[0]}) == [1, 2]


def test_a_key_used_earlier_with_another_body_is_refused() -> None:
    requests, hashes = _requests(("fine", 1), ("k", 1))
    first = first_uses(requests, hashes)
    with pytest.raises(InvalidInput) as refused:
        creating(requests, hashes, first, {"fine": hashes[0], "k": "another body's hash"})
    assert refused.value.field == "runs[1].idempotency_key"
