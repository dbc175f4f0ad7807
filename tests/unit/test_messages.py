"""Claimed runs into messages (app/engine/messages.py) and back (app/bus/message.py): a message carries
runs of one tenant and lane only, in the claim's order, at most MESSAGE_RUNS of them and what fits in
its bytes; a run that cannot be encoded fails alone."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from app.bus.message import RunMessage, UnknownVersion, decode, message_of
from app.config import Settings
from app.engine.messages import Built, build_messages

S = Settings(message_runs=3, urgent_priority=1)


def claimed(tenant: str, *, priority: int = 5, payload_json: str = "{}") -> dict[str, Any]:
    """A claimed row as the claim returns it (build_messages reads it by key)."""
    return {
        "id": uuid.uuid4(),
        "scheduled_at": datetime.now(UTC),
        "tenant_id": tenant,
        "job": "j",
        "attempt": 0,
        "epoch": 1,
        "payload_json": payload_json,
        "target_json": '{"type": "noop"}',
        "timeout_seconds": 30.0,
        "priority": priority,
        "traceparent": None,
    }


def carried(built: Built) -> list[list[RunMessage]]:
    return [decode(m.payload) for m in built.messages]


def test_runs_of_one_tenant_and_lane_travel_together_in_claim_order() -> None:
    rows = [claimed("a"), claimed("b"), claimed("a"), claimed("a", priority=0), claimed("b"), claimed("a")]
    built = build_messages(rows, S)  # type: ignore[arg-type]
    messages = carried(built)
    # a's normal runs, b's, a's urgent one: a message never mixes tenants or lanes.
    assert [[r.run_id for r in m] for m in messages] == [
        [rows[0]["id"], rows[2]["id"], rows[5]["id"]],
        [rows[1]["id"], rows[4]["id"]],
        [rows[3]["id"]],
    ]
    assert [m.subject for m in built.messages] == [
        S.subject_for("a", 5),
        S.subject_for("b", 5),
        S.subject_for("a", 0),
    ]
    assert built.sizes == [3, 2, 1] and built.urgent == 1
    # `rows` follows the messages, and a PubAck per message becomes a flag per run.
    assert [r["id"] for r in built.rows] == [r.run_id for m in messages for r in m]
    assert built.run_flags([True, False, True]) == [True, True, True, False, False, True]
    # The first run's (run, epoch) names the message; every run has a traceparent of its own.
    assert [m.headers["Nats-Msg-Id"] for m in built.messages] == [m[0].msg_id for m in messages]
    traceparents = [r.traceparent for m in messages for r in m]
    assert all(traceparents) and len(set(traceparents)) == len(rows)


def test_a_message_holds_at_most_message_runs_and_what_fits_in_its_bytes() -> None:
    rows = [claimed("a") for _ in range(7)]
    assert build_messages(rows, S).sizes == [3, 3, 1]  # type: ignore[arg-type]
    big = '{"blob": "' + "x" * 3000 + '"}'
    rows = [claimed("a", payload_json=big) for _ in range(3)]
    built = build_messages(rows, S, max_bytes=7000)  # type: ignore[arg-type]
    assert built.sizes == [2, 1] and all(len(m.payload) <= 7000 for m in built.messages)
    # A run larger than the limit alone still goes, alone (the server's limit is larger).
    assert build_messages(rows, S, max_bytes=100).sizes == [1, 1, 1]  # type: ignore[arg-type]


def test_a_run_that_cannot_be_encoded_fails_alone() -> None:
    deep = "[" * 300 + "]" * 300  # jsonb keeps it; orjson will not encode it
    rows = [claimed("a"), claimed("a", payload_json=deep), claimed("a"), claimed("b", payload_json="1e400")]
    built = build_messages(rows, S)  # type: ignore[arg-type]
    assert [row["id"] for row, _ in built.unbuildable] == [rows[1]["id"], rows[3]["id"]]
    assert [[r.run_id for r in m] for m in carried(built)] == [[rows[0]["id"], rows[2]["id"]]]


def test_a_message_of_one_run_round_trips_and_another_version_is_refused() -> None:
    run = RunMessage(
        uuid.uuid4(), datetime.now(UTC), "a", "j", 1, 2, {"k": [1]}, {"type": "noop"}, 30.0, "00-x"
    )
    assert decode(message_of([run.entry()])) == [run]
    for version in (1, 3):
        with pytest.raises(UnknownVersion):
            decode(orjson.dumps(orjson.loads(run.entry()) | {"v": version}))


def test_decoded_run_ids_key_order_and_print_as_the_standard_uuids() -> None:
    """The worker keys its held and executing runs by id and orders a fence by id: a decoded id
    (asyncpg's UUID, for speed) must be interchangeable with the uuid.UUID it was sent as."""
    ids = [uuid.uuid4() for _ in range(50)]
    now = datetime.now(UTC)
    entries = [RunMessage(i, now, "a", "j", 1, 1, {}, {"type": "noop"}, 30.0).entry() for i in ids]
    decoded = [run.run_id for run in decode(message_of(entries))]
    assert all(isinstance(d, uuid.UUID) for d in decoded)
    assert {d: n for n, d in enumerate(decoded)} == {i: n for n, i in enumerate(ids)}
    assert sorted(range(50), key=decoded.__getitem__) == sorted(range(50), key=ids.__getitem__)
    assert [str(d) for d in decoded] == [str(i) for i in ids]


@pytest.mark.parametrize(
    "data",
    [
        b"[]",
        b'{"v": 2, "runs": []}',
        b'{"v": 2, "runs": {}}',
        b'{"v": 2, "runs": [[1]]}',
        b'{"v": 2, "runs": [{"run_id": "x"}]}',
        b'{"v": 2, "runs": [{"run_id": 1, "scheduled_at": 2, "tenant_id": "a", "job": "j", "attempt": 1,'
        b' "epoch": 1, "payload": {}, "target": {}, "timeout_seconds": 1}]}',
        b"\xff",
    ],
)
def test_a_malformed_message_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode(data)


def test_an_unknown_version_is_refused_as_such() -> None:
    with pytest.raises(UnknownVersion):
        decode(b'{"v": 3, "runs": []}')
