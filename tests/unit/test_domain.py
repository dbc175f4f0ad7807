"""The run's states and the run and job records (app/domain.py) agree with the API contract."""

from __future__ import annotations

from typing import get_args

from app.api.schemas.jobs import Job
from app.api.schemas.runs import Run
from app.domain import JOB_FIELDS, RUN_FIELDS, RunStatus


def test_the_contracts_statuses_are_the_enums() -> None:
    assert list(get_args(Run.model_fields["status"].annotation)) == [s.value for s in RunStatus]


def test_the_records_have_the_contracts_fields_in_order() -> None:
    assert tuple(Run.model_fields) == RUN_FIELDS
    assert tuple(Job.model_fields) == JOB_FIELDS
