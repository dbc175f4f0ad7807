"""A large JSON body parsed in pieces, in a thread: the same value as `json.loads`, but its outer
containers are walked in Python and only their members parsed by the C scanner, one at a time.

The C scanner holds the GIL for the whole text it is given: a 16 MiB batch in one `json.loads`
held it for 0.25-0.5 s in a thread too, and the event loop (the engine's too) waited that long at
every turn; a submission that awaits Postgres a few times waited a few of them. In pieces, each
step holds it for one member (a batch's run's field: a payload, bounded by what one run may carry
once checked) and the thread gives the GIL back between steps."""

from __future__ import annotations

import json
import re
from typing import Any

# Containers this deep and shallower are walked in Python: a batch, its runs, each run's fields.
WALKED_DEPTH = 3

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def loads_in_pieces(body: bytes) -> Any:
    """`json.loads(body)`; JSONDecodeError (or UnicodeDecodeError, RecursionError) as it would."""
    text = body.decode(json.detect_encoding(body), "surrogatepass")  # as json.loads decodes bytes
    value, end = _value(text, _skip(text, 0), 1)
    end = _skip(text, end)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def _value(text: str, at: int, depth: int) -> tuple[Any, int]:
    if depth <= WALKED_DEPTH and text.startswith("{", at):
        return _object(text, at + 1, depth)
    if depth <= WALKED_DEPTH and text.startswith("[", at):
        return _array(text, at + 1, depth)
    return _DECODER.raw_decode(text, at)


def _skip(text: str, at: int) -> int:
    return _SPACE.match(text, at).end()  # type: ignore[union-attr]


def _object(text: str, at: int, depth: int) -> tuple[dict[str, Any], int]:
    members: dict[str, Any] = {}
    at = _skip(text, at)
    if text.startswith("}", at):
        return members, at + 1
    while True:
        if not text.startswith('"', at):
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, at)
        key, at = _DECODER.raw_decode(text, at)
        at = _skip(text, at)
        if not text.startswith(":", at):
            raise json.JSONDecodeError("Expecting ':' delimiter", text, at)
        members[key], at = _value(text, _skip(text, at + 1), depth + 1)
        at = _skip(text, at)
        if text.startswith("}", at):
            return members, at + 1
        if not text.startswith(",", at):
            raise json.JSONDecodeError("Expecting ',' delimiter", text, at)
        at = _skip(text, at + 1)


def _array(text: str, at: int, depth: int) -> tuple[list[Any], int]:
    items: list[Any] = []
    at = _skip(text, at)
    if text.startswith("]", at):
        return items, at + 1
    while True:
        item, at = _value(text, at, depth + 1)
        items.append(item)
        at = _skip(text, at)
        if text.startswith("]", at):
            return items, at + 1
        if not text.startswith(",", at):
            raise json.JSONDecodeError("Expecting ',' delimiter", text, at)
        at = _skip(text, at + 1)
