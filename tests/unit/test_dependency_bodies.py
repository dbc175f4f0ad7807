"""What a target receives when its run passes its parents' results (docs/dependencies.md), and the
dependency fields' checks that need no database."""

from __future__ import annotations

import orjson
import pytest

from app.errors import InvalidInput
from app.services.dependencies import Dependencies, resolve
from app.services.run_requests import RunRequest
from app.worker.targets import RunContext, request_body

HTTP = {"type": "http", "url": "https://example.com/hook"}
PARENTS = {"extract": {"rows": 3}, "01a24090-5961-7ae2-bd3d-bda1e58eeff1": None}


def context(parents: dict | None) -> RunContext:
    return RunContext("r", "acme", "job", 1, 1, None, parents)


def test_the_default_body_is_the_payload_or_the_payload_beside_the_parents() -> None:
    assert orjson.loads(request_body(HTTP, {"a": 1}, context(None), 0)) == {"a": 1}
    body = orjson.loads(request_body(HTTP, {"a": 1}, context(PARENTS), 0))
    assert body == {"payload": {"a": 1}, "parents": PARENTS}


def test_the_envelope_carries_the_parents_beside_the_payload() -> None:
    target = {**HTTP, "body": "envelope"}
    assert "parents" not in orjson.loads(request_body(target, [1], context(None), 0))["data"]
    data = orjson.loads(request_body(target, [1], context(PARENTS), 0))["data"]
    assert (data["payload"], data["parents"]) == ([1], PARENTS)


def request(i: int, ref: str | None = None, *depends_on: str) -> RunRequest:
    return RunRequest("job", None, None, None, f"runs[{i}].", dependencies=Dependencies(ref, depends_on))


def test_parents_are_earlier_refs_or_run_ids() -> None:
    run_id = "01a24090-5961-7ae2-bd3d-bda1e58eeff1"
    parents = resolve([request(0, "a"), request(1, "b", "a", run_id)])
    assert [(p.name, p.item) for p in parents[1]] == [("a", 0), (run_id, None)]


@pytest.mark.parametrize(
    ("requests", "field"),
    [
        ([request(0, "a", "b"), request(1, "b")], "runs[0].depends_on[0]"),  # a later item
        ([request(0, "a", "a")], "runs[0].depends_on[0]"),  # itself
        ([request(0, "a"), request(1, "a")], "runs[1].ref"),  # a ref twice
        ([request(0, "01a24090-5961-7ae2-bd3d-bda1e58eeff1")], "runs[0].ref"),  # a ref that is an id
        ([request(0, None, "nope")], "runs[0].depends_on[0]"),
        ([request(0, "x"), request(1, None, "x", "x")], "runs[1].depends_on[1]"),
    ],
)
def test_a_reference_that_could_make_a_cycle_or_means_nothing_is_refused(
    requests: list[RunRequest], field: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        resolve(requests)
    assert refused.value.field == field
