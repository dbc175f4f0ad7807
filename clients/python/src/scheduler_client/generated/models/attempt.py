from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.attempt_outcome_type_0 import AttemptOutcomeType0
from typing import cast
import datetime


T = TypeVar("T", bound="Attempt")


@_attrs_define
class Attempt:
    """One attempt of a run, written by the statements that start and end it (no extra write).

    Attributes:
        attempt (int):
        duration_ms (float | None):
        epoch (int): The lease fence the attempt ran under.
        error (None | str): A failure's reason: for a webhook, `HTTP <status>: <excerpt>`.
        finished_at (datetime.datetime | None): Null while the attempt runs.
        http_status (int | None): A webhook's answer status, success included (e.g. 200); null for other targets and for
            an attempt that got no answer (a timeout, a refused connection).
        outcome (AttemptOutcomeType0 | None): Null while it runs. `lost`: its worker stopped heartbeating and the reaper
            closed it; `timed_out`: it passed the job's timeout_seconds.
        started_at (datetime.datetime):
        worker (None | str): The worker's lease owner name (SCHEDULER_OWNER).
    """

    attempt: int
    duration_ms: float | None
    epoch: int
    error: None | str
    finished_at: datetime.datetime | None
    http_status: int | None
    outcome: AttemptOutcomeType0 | None
    started_at: datetime.datetime
    worker: None | str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        attempt = self.attempt

        duration_ms: float | None
        duration_ms = self.duration_ms

        epoch = self.epoch

        error: None | str
        error = self.error

        finished_at: None | str
        if isinstance(self.finished_at, datetime.datetime):
            finished_at = self.finished_at.isoformat()
        else:
            finished_at = self.finished_at

        http_status: int | None
        http_status = self.http_status

        outcome: None | str
        if isinstance(self.outcome, AttemptOutcomeType0):
            outcome = self.outcome.value
        else:
            outcome = self.outcome

        started_at = self.started_at.isoformat()

        worker: None | str
        worker = self.worker

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "attempt": attempt,
                "duration_ms": duration_ms,
                "epoch": epoch,
                "error": error,
                "finished_at": finished_at,
                "http_status": http_status,
                "outcome": outcome,
                "started_at": started_at,
                "worker": worker,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        attempt = d.pop("attempt")

        def _parse_duration_ms(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        duration_ms = _parse_duration_ms(d.pop("duration_ms"))

        epoch = d.pop("epoch")

        def _parse_error(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        error = _parse_error(d.pop("error"))

        def _parse_finished_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                finished_at_type_0 = datetime.datetime.fromisoformat(data)

                return finished_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        finished_at = _parse_finished_at(d.pop("finished_at"))

        def _parse_http_status(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        http_status = _parse_http_status(d.pop("http_status"))

        def _parse_outcome(data: object) -> AttemptOutcomeType0 | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                outcome_type_0 = AttemptOutcomeType0(data)

                return outcome_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(AttemptOutcomeType0 | None, data)

        outcome = _parse_outcome(d.pop("outcome"))

        started_at = datetime.datetime.fromisoformat(d.pop("started_at"))

        def _parse_worker(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        worker = _parse_worker(d.pop("worker"))

        attempt = cls(
            attempt=attempt,
            duration_ms=duration_ms,
            epoch=epoch,
            error=error,
            finished_at=finished_at,
            http_status=http_status,
            outcome=outcome,
            started_at=started_at,
            worker=worker,
        )

        attempt.additional_properties = d
        return attempt

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
