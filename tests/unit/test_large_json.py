"""A large body parsed in pieces is the value json.loads makes, and refused where json.loads refuses."""

from __future__ import annotations

import json

import pytest

from app.api.large_json import loads_in_pieces

SAME = [
    b'{"runs": [{"job": "a", "payload": {"x": [1, 2.5, null, true, "s"]}}, {"job": "b"}]}',
    b' \n{ "runs" : [ ] , "k" : { } }\t',
    b'[[[[[[1]]]]], {"a": {"b": {"c": {"d": 1}}}}]',
    b'{"a": 1, "a": 2}',  # the last of a repeated key wins, as in json.loads
    b'{"x": NaN, "y": -Infinity, "z": 1e400}',
    b'"just a string"',
    b"12",
    b'{"s": "\\ud800 \\u0000 \xc3\xa9"}',
    "\ufeff{}".encode("utf-8"),  # a BOM: json.loads takes it from bytes
    '{"runs": [1]}'.encode("utf-16"),
]

BROKEN = [b"", b"{", b'{"runs": [1,]}', b'{"a" 1}', b'{"a": 1 "b": 2}', b"{1: 2}", b"[1] [2]", b'{"a": [1}']


@pytest.mark.parametrize("body", SAME)
def test_the_same_value_as_json_loads(body: bytes) -> None:
    assert repr(loads_in_pieces(body)) == repr(json.loads(body))


@pytest.mark.parametrize("body", BROKEN)
def test_refused_where_json_loads_refuses(body: bytes) -> None:
    with pytest.raises(json.JSONDecodeError):
        json.loads(body)
    with pytest.raises(json.JSONDecodeError):
        loads_in_pieces(body)
