from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast


T = TypeVar("T", bound="RateLimit")


@_attrs_define
class RateLimit:
    """
    Attributes:
        limit (int): At most this many runs of one key start in any window of period_seconds (a sliding window: never
            twice the limit across a period's edge). Each attempt is a start.
        period_seconds (float): The window's length, 1 s to a day.
        key (None | str | Unset): A dotted path into the run's payload; runs with the same value share the limit (a
            payload without the field: the empty key). Absent: one key for the whole job.
    """

    limit: int
    period_seconds: float
    key: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        limit = self.limit

        period_seconds = self.period_seconds

        key: None | str | Unset
        if isinstance(self.key, Unset):
            key = UNSET
        else:
            key = self.key

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "limit": limit,
                "period_seconds": period_seconds,
            }
        )
        if key is not UNSET:
            field_dict["key"] = key

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        limit = d.pop("limit")

        period_seconds = d.pop("period_seconds")

        def _parse_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        key = _parse_key(d.pop("key", UNSET))

        rate_limit = cls(
            limit=limit,
            period_seconds=period_seconds,
            key=key,
        )

        return rate_limit
