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


def stored(result) -> object:
    assert result.json is not None and len(result.json.encode()) <= LIMIT
    return orjson.loads(result.json)


def test_a_json_value_is_kept_as_it_is() -> None:
    result = result_of_value({"rows": [1, 2.5, "x"], "ok": True}, LIMIT)
    assert stored(result) == {"rows": [1, 2.5, "x"], "ok": True} and not result.truncated
    assert result_of_value(None, LIMIT).json is None


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
    text = stored(result_of_value(value, LIMIT))
    assert "\x00" not in str(text) and "\ud800" not in str(text)


def test_an_escaped_backslash_before_u0000_is_not_a_nul() -> None:
    assert stored(result_of_value({"a": "\\u0000"}, LIMIT)) == {"a": "\\u0000"}


def test_a_result_over_the_limit_is_cut_and_flagged_never_an_error() -> None:
    big = result_of_value({"blob": "x" * 10 * LIMIT}, LIMIT)
    assert big.truncated and str(stored(big)).startswith('{"blob":"xxx')
    # Quotes and control characters escape to several bytes each: still within the limit.
    for nasty in ('"' * 5 * LIMIT, "\x01" * 5 * LIMIT):
        result = result_of_body(nasty.encode(), "text/plain", LIMIT)
        assert result.truncated and stored(result)


def test_a_body_is_json_only_when_it_says_so_and_parses() -> None:
    assert stored(result_of_body(b'{"a": 1}', "application/json; charset=utf-8", LIMIT)) == {"a": 1}
    assert stored(result_of_body(b'{"a": 1}', "application/problem+json", LIMIT)) == {"a": 1}
    assert stored(result_of_body(b'{"a": 1}', "text/plain", LIMIT)) == '{"a": 1}'
    assert stored(result_of_body(b"{not json", "application/json", LIMIT)) == "{not json"
    assert result_of_body(b"", "application/json", LIMIT).json is None


def test_binary_bytes_become_replacement_characters() -> None:
    text = stored(result_of_body(b"bad\x00body \xff\xfe \xed\xa0\x80", "application/octet-stream", LIMIT))
    assert isinstance(text, str) and text.startswith("bad\ufffdbody") and "\x00" not in text


def test_one_byte_past_the_limit_means_the_body_was_cut() -> None:
    assert not result_of_body(b"x" * LIMIT, "text/plain", LIMIT + 64).truncated
    cut = result_of_body(b'{"a": "' + b"x" * LIMIT + b'"}', "application/json", LIMIT)
    assert cut.truncated and isinstance(stored(cut), str)


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
