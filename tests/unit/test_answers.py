"""What a target answered, made storable (app/services/answers.py): results bounded and sanitised,
Retry-After bounded or ignored. Hostile values first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import orjson
import pytest

from app.services.answers import result_of_body, result_of_value, retry_after_seconds

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LIMIT = 1024
DEPTH = 32


def stored(result) -> object:
    assert result.json is not None and len(result.json.encode()) <= LIMIT
    return orjson.loads(result.json)


def test_a_json_value_is_kept_as_it_is() -> None:
    result = result_of_value({"rows": [1, 2.5, "x"], "ok": True}, LIMIT, max_depth=DEPTH)
    assert stored(result) == {"rows": [1, 2.5, "x"], "ok": True} and not result.truncated
    assert result_of_value(None, LIMIT, max_depth=DEPTH).json is None


@pytest.mark.parametrize(
    "value",
    [
        {"a": "x\x00y"},  # jsonb refuses an escaped NUL
        "lone \ud800 surrogate",  # orjson refuses it
        2**70,  # beyond 64 bits
        object(),  # not JSON at all
    ],
)
def test_a_value_json_or_postgres_cannot_carry_is_stored_as_sanitised_text(value: object) -> None:
    text = stored(result_of_value(value, LIMIT, max_depth=DEPTH))
    assert "\x00" not in str(text) and "\ud800" not in str(text)


def test_an_escaped_backslash_before_u0000_is_not_a_nul() -> None:
    assert stored(result_of_value({"a": "\\u0000"}, LIMIT, max_depth=DEPTH)) == {"a": "\\u0000"}


def test_a_result_over_the_limit_is_cut_and_flagged_never_an_error() -> None:
    big = result_of_value({"blob": "x" * 10 * LIMIT}, LIMIT, max_depth=DEPTH)
    assert big.truncated and str(stored(big)).startswith('{"blob":"xxx')
    # Quotes and control characters escape to several bytes each: still within the limit.
    for nasty in ('"' * 5 * LIMIT, "\x01" * 5 * LIMIT):
        result = result_of_body(nasty.encode(), "text/plain", LIMIT, max_depth=DEPTH)
        assert result.truncated and stored(result)


def test_a_body_is_json_only_when_it_says_so_and_parses() -> None:
    assert stored(result_of_body(b'{"a": 1}', "application/json; charset=utf-8", LIMIT, max_depth=DEPTH)) == {
        "a": 1
    }
    assert stored(result_of_body(b'{"a": 1}', "application/problem+json", LIMIT, max_depth=DEPTH)) == {"a": 1}
    assert stored(result_of_body(b'{"a": 1}', "text/plain", LIMIT, max_depth=DEPTH)) == '{"a": 1}'
    assert stored(result_of_body(b"{not json", "application/json", LIMIT, max_depth=DEPTH)) == "{not json"
    assert result_of_body(b"", "application/json", LIMIT, max_depth=DEPTH).json is None


def test_binary_bytes_become_replacement_characters() -> None:
    text = stored(
        result_of_body(
            b"bad\x00body \xff\xfe \xed\xa0\x80", "application/octet-stream", LIMIT, max_depth=DEPTH
        )
    )
    assert isinstance(text, str) and text.startswith("bad\ufffdbody") and "\x00" not in text


def test_one_byte_past_the_limit_means_the_body_was_cut() -> None:
    assert not result_of_body(b"x" * LIMIT, "text/plain", LIMIT + 64, max_depth=DEPTH).truncated
    cut = result_of_body(b'{"a": "' + b"x" * LIMIT + b'"}', "application/json", LIMIT, max_depth=DEPTH)
    assert cut.truncated and isinstance(stored(cut), str)


def nested(depth: int) -> bytes:
    return b"[" * depth + b"1" + b"]" * depth


@pytest.mark.parametrize("depth", [DEPTH + 1, 100, 253, 254, 255, 1100, 5000])
def test_json_nested_deeper_than_a_payload_may_be_is_kept_as_its_text_and_flagged(depth: int) -> None:
    """orjson writes at most 254 levels, the run's wrappers included: a result of 253 stored as JSON
    failed every listing page holding it. 5000 levels: past the interpreter's recursion limit."""
    body = nested(depth)
    result = result_of_body(body, "application/json", 16 * LIMIT, max_depth=DEPTH)
    assert result.truncated and stored_within(result, 16 * LIMIT) == body.decode()
    assert orjson.dumps({"runs": [{"result": orjson.loads(result.json or "")}]})  # every reader's wrapper


def test_json_as_deep_as_a_payload_may_be_is_kept_as_json() -> None:
    result = result_of_body(nested(DEPTH), "application/json", LIMIT, max_depth=DEPTH)
    assert not result.truncated and stored(result) == orjson.loads(nested(DEPTH))
    # Brackets inside strings are no nesting.
    wide = orjson.dumps({"rows": [{"n": i, "s": "[[{{"} for i in range(40)], "gone": None})
    result = result_of_body(wide, "application/json", LIMIT * 4, max_depth=DEPTH)
    assert not result.truncated and stored_within(result, LIMIT * 4) == orjson.loads(wide)


@pytest.mark.parametrize(
    "body",
    [
        b'{"n": 18446744073709551616}',  # 2**64: orjson reads it as a float, a silent change
        b'{"n": -9223372036854775809}',  # below -2**63: the same
        b'{"n": 123456789012345678901234567890}',
        b'{"n": 1' + b"0" * 5000 + b"}",  # past the interpreter's digits limit
        b'{"n": 1e400}',  # beyond a double: orjson refuses it
        b'[-1e999, "x"]',
    ],
)
def test_numbers_beyond_a_payloads_bounds_are_kept_as_text_and_flagged(body: bytes) -> None:
    result = result_of_body(body, "application/json", 16 * LIMIT, max_depth=DEPTH)
    assert result.truncated and stored_within(result, 16 * LIMIT) == body.decode()


@pytest.mark.parametrize(
    "body",
    [b'{"n": 18446744073709551615}', b'{"n": -9223372036854775808}', b'{"id": "12345678901234567890123"}'],
)
def test_numbers_within_64_bits_and_long_digit_strings_stay_json(body: bytes) -> None:
    result = result_of_body(body, "application/json", LIMIT, max_depth=DEPTH)
    assert not result.truncated and stored(result) == orjson.loads(body)


@pytest.mark.parametrize("literal", [b"[NaN]", b"[Infinity]", b'"\\ud800"'])
def test_what_only_pythons_parser_reads_is_text_not_flagged(literal: bytes) -> None:
    result = result_of_body(literal, "application/json", LIMIT, max_depth=DEPTH)
    assert not result.truncated and isinstance(stored(result), str)


@pytest.mark.parametrize("value", [float("nan"), [float("inf")], {"n": 2**70}])
def test_a_handlers_value_beyond_a_payloads_bounds_is_text_and_flagged(value: object) -> None:
    result = result_of_value(value, LIMIT, max_depth=DEPTH)
    assert result.truncated and isinstance(stored(result), str)


def test_a_handlers_value_nested_too_deep_is_text_and_flagged() -> None:
    for depth in (DEPTH + 1, 254, 300):
        value: object = 1
        for _ in range(depth):
            value = [value]
        result = result_of_value(value, 16 * LIMIT, max_depth=DEPTH)
        assert result.truncated and isinstance(stored_within(result, 16 * LIMIT), str), depth


def stored_within(result, limit: int) -> object:
    assert result.json is not None and len(result.json.encode()) <= limit
    return orjson.loads(result.json)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("120", 120.0),
        (" 7 ", 7.0),
        ("0", 0.0),
        ("99999999999999999999999999", 3600.0),  # huge: bounded
        (format_datetime(NOW + timedelta(seconds=90), usegmt=True), 90.0),
        (format_datetime(NOW + timedelta(days=3000), usegmt=True), 3600.0),  # far future: bounded
        ("Fri, 31 Dec 9999 23:59:59 GMT", 3600.0),
        (None, None),
        ("-5", None),  # negative
        ("1.5", None),  # not delta-seconds
        ("1e9", None),
        ("soon", None),  # garbage
        ("\u0663", None),  # a digit, but not an ASCII one
        (format_datetime(NOW - timedelta(hours=1), usegmt=True), None),  # in the past
        ("Wed, 21 Oct 2015 07:28:00", None),  # no zone
        ("x" * 100_000, None),
    ],
)
def test_retry_after_is_bounded_or_ignored(header: str | None, expected: float | None) -> None:
    assert retry_after_seconds(header, 3600, NOW) == expected
