from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast
import datetime


T = TypeVar("T", bound="Backfill")


@_attrs_define
class Backfill:
    """
    Attributes:
        from_ (datetime.datetime): The first occurrence time included. ISO 8601 with a timezone, at most
            SCHEDULER_MAX_SCHEDULE_BEHIND_DAYS (7) in the past.
        to (datetime.datetime): The end, excluded; after `from`, at most SCHEDULER_MAX_SCHEDULE_AHEAD_DAYS (366) ahead.
            [from, to) may hold at most 1000 occurrences.
    """

    from_: datetime.datetime
    to: datetime.datetime

    def to_dict(self) -> dict[str, Any]:
        from_ = self.from_.isoformat()

        to = self.to.isoformat()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "from": from_,
                "to": to,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        from_ = datetime.datetime.fromisoformat(d.pop("from"))

        to = datetime.datetime.fromisoformat(d.pop("to"))

        backfill = cls(
            from_=from_,
            to=to,
        )

        return backfill
