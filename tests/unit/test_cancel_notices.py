"""Cancel notices (app/bus/cancels.py): what an API process tells the workers, as the workers read
it. A notice is only a hint, but it arrives over the network: whatever is malformed is dropped."""

from __future__ import annotations

import uuid

import orjson

from app.bus.cancels import NOTICE_RUNS, decode, encode


def test_a_notice_names_each_attempt_by_run_and_epoch_in_bounded_chunks() -> None:
    attempts = [(uuid.uuid4(), i % 7 + 1) for i in range(NOTICE_RUNS * 2 + 3)]
    notices = encode(attempts)
    assert len(notices) == 3
    decoded = set().union(*(decode(n) for n in notices))
    assert decoded == set(attempts)
    assert encode([]) == []


def test_what_is_not_a_run_and_an_epoch_is_ignored() -> None:
    good = uuid.uuid4()
    hostile = [
        [str(good), 3],
        ["not a uuid", 1],
        [str(uuid.uuid4()), "2"],
        [str(uuid.uuid4()), 1.5],
        [str(uuid.uuid4()), True],
        [str(uuid.uuid4())],
        {"id": str(uuid.uuid4())},
        None,
    ]
    assert decode(orjson.dumps(hostile)) == {(good, 3)}
    for data in (b"", b"\x00\xff", b"{}", b'"x"', b"[[1, 2, 3]]", b"[" * 10_000):
        assert decode(data) == set()
