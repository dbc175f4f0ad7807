"""A submission's input checks (app.services.run_requests.checked), the same for the API's routes and
the dashboard: each refusal names the field at fault, as the API's 422 does."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.config import Settings
from app.errors import InvalidInput, PayloadTooLarge
from app.services.run_requests import RunRequest, Submission, checked

SETTINGS = Settings(max_batch=3, max_payload_bytes=100, max_schedule_ahead_days=2, max_schedule_behind_days=1)


def run(**fields: Any) -> RunRequest:
    return replace(RunRequest("hello", None, None, None), **fields)


def refusal(submission: Submission) -> tuple[type[Exception], str | None]:
    with pytest.raises((InvalidInput, PayloadTooLarge)) as caught:
        checked(submission, SETTINGS)
    return type(caught.value), caught.value.field


def test_a_batchs_runs_are_named_by_their_place() -> None:
    runs = checked(Submission("acme", [run(), run()], batch=True), SETTINGS)
    assert [r.field for r in runs] == ["runs[0].", "runs[1]."]
    assert [r.field for r in checked(Submission("acme", [run()]), SETTINGS)] == [""]


def test_each_refusal_names_its_field() -> None:
    far = datetime.now(UTC) + timedelta(days=3)
    past = datetime.now(UTC) - timedelta(days=2)
    assert refusal(Submission("acme", [run(), run(payload="x" * 200)], batch=True)) == (
        PayloadTooLarge,
        "runs[1].payload",
    )
    assert refusal(Submission("acme", [run(metadata={"a": "x" * 5000})])) == (InvalidInput, "metadata")
    assert refusal(Submission("acme", [run(scheduled_at=far)])) == (InvalidInput, "scheduled_at")
    assert refusal(Submission("acme", [run(), run(scheduled_at=past)], batch=True)) == (
        InvalidInput,
        "runs[1].scheduled_at",
    )
    assert refusal(Submission("acme", [run()] * 4, batch=True)) == (InvalidInput, "runs")


def test_the_key_beside_a_run_is_its_key_and_must_agree_with_its_own() -> None:
    [given] = checked(Submission("acme", [run()], idempotency_key="k"), SETTINGS)
    assert given.idempotency_key == "k"
    [same] = checked(Submission("acme", [run(idempotency_key="k")], idempotency_key="k"), SETTINGS)
    assert same.idempotency_key == "k"
    [own] = checked(Submission("acme", [run(idempotency_key="mine")]), SETTINGS)
    assert own.idempotency_key == "mine"
    differing = Submission("acme", [run(idempotency_key="other")], idempotency_key="k")
    assert refusal(differing) == (InvalidInput, "idempotency_key")
    with pytest.raises(ValueError):
        Submission("acme", [run(), run()], batch=True, idempotency_key="k")
