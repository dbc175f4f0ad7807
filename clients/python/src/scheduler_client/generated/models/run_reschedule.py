from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast
import datetime


T = TypeVar("T", bound="RunReschedule")


@_attrs_define
class RunReschedule:
    """
    Attributes:
        due_at (datetime.datetime): ISO 8601 with a timezone: when the run may next be claimed. A past time means now;
            at most SCHEDULER_MAX_SCHEDULE_AHEAD_DAYS (366) ahead. The run keeps its id and scheduled_at.
    """

    due_at: datetime.datetime

    def to_dict(self) -> dict[str, Any]:
        due_at = self.due_at.isoformat()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "due_at": due_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        due_at = datetime.datetime.fromisoformat(d.pop("due_at"))

        run_reschedule = cls(
            due_at=due_at,
        )

        return run_reschedule
