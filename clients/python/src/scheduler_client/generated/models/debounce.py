from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast


T = TypeVar("T", bound="Debounce")


@_attrs_define
class Debounce:
    """
    Attributes:
        max_delay_seconds (float): The run is never due later than this long after the key's first submission: at least
            period_seconds, at most a day.
        period_seconds (float): A key's first submission makes a run due this long after it (1 s to an hour); each later
            one while that run is pending replaces its payload and makes it due this long after itself.
        key (None | str | Unset): A dotted path into the run's payload; runs with equal values (as JSON: 1 and "1"
            differ) share the key, and so do runs whose payload lacks the field or has it null. Absent or null: one key for
            the whole job.
    """

    max_delay_seconds: float
    period_seconds: float
    key: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        max_delay_seconds = self.max_delay_seconds

        period_seconds = self.period_seconds

        key: None | str | Unset
        if isinstance(self.key, Unset):
            key = UNSET
        else:
            key = self.key

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "max_delay_seconds": max_delay_seconds,
                "period_seconds": period_seconds,
            }
        )
        if key is not UNSET:
            field_dict["key"] = key

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        max_delay_seconds = d.pop("max_delay_seconds")

        period_seconds = d.pop("period_seconds")

        def _parse_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        key = _parse_key(d.pop("key", UNSET))

        debounce = cls(
            max_delay_seconds=max_delay_seconds,
            period_seconds=period_seconds,
            key=key,
        )

        return debounce
