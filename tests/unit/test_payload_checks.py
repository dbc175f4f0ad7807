"""check_payload: one rule for every door a payload comes in by (job PUT, run POST, batch)."""

from __future__ import annotations

from typing import Any

import pytest

from app.errors import AppError, InvalidInput, PayloadTooLarge
from app.services.validation import check_payload


def _refusal(payload: Any, limit: int = 1000, max_depth: int = 8) -> AppError:
    with pytest.raises(AppError) as refused:
        check_payload(payload, limit, max_depth=max_depth, field="payload")
    assert refused.value.field == "payload"
    return refused.value


@pytest.mark.parametrize(
    "payload",
    [None, 0, -1.5, "text", [], {}, {"a": [1, {"b": "c"}]}, "a\\u0000 escaped backslash", "\\\\u0000"],
)
def test_ordinary_payloads_pass(payload: Any) -> None:
    check_payload(payload, 1000, max_depth=8, field="payload")


def test_over_the_size_limit_is_413() -> None:
    assert isinstance(_refusal("x" * 2000), PayloadTooLarge)


def test_nesting_past_the_depth_limit_is_refused_with_the_depth() -> None:
    deep: Any = 1
    for _ in range(9):
        deep = [deep]
    refusal = _refusal(deep)
    assert isinstance(refusal, InvalidInput) and "deeper than 8" in refusal.message
    check_payload(deep[0], 1000, max_depth=9, field="payload")  # one level less passes its limit


def test_deeper_than_the_encoder_can_go_names_the_depth() -> None:
    deep: Any = {}
    for _ in range(300):
        deep = {"a": deep}
    assert "deeper than 8" in _refusal(deep, limit=10_000).message


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_numbers_json_cannot_carry_are_refused(number: float) -> None:
    assert "cannot represent" in _refusal({"n": [number]}).message


@pytest.mark.parametrize("payload", [{"k": "a\x00b"}, {"a\x00": 1}])
def test_a_nul_character_is_refused(payload: Any) -> None:
    assert "NUL" in _refusal(payload).message


@pytest.mark.parametrize("payload", [2**64, "\ud800"])
def test_values_the_codec_cannot_store_are_refused(payload: Any) -> None:
    assert isinstance(_refusal(payload), InvalidInput)
