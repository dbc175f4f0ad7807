from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast


T = TypeVar("T", bound="Unique")


@_attrs_define
class Unique:
    """
    Attributes:
        key (None | str | Unset): A dotted path into the run's payload; runs with equal values (as JSON: 1 and "1"
            differ) share the key, and so do runs whose payload lacks the field or has it null. Absent or null: one key for
            the whole job.
        within_seconds (float | None | Unset): At most one run per key created within this many seconds (1 s to 30
            days), whatever became of it. Null: at most one live run (pending, dispatched or running) per key.
    """

    key: None | str | Unset = UNSET
    within_seconds: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        key: None | str | Unset
        if isinstance(self.key, Unset):
            key = UNSET
        else:
            key = self.key

        within_seconds: float | None | Unset
        if isinstance(self.within_seconds, Unset):
            within_seconds = UNSET
        else:
            within_seconds = self.within_seconds

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if key is not UNSET:
            field_dict["key"] = key
        if within_seconds is not UNSET:
            field_dict["within_seconds"] = within_seconds

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        key = _parse_key(d.pop("key", UNSET))

        def _parse_within_seconds(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        within_seconds = _parse_within_seconds(d.pop("within_seconds", UNSET))

        unique = cls(
            key=key,
            within_seconds=within_seconds,
        )

        return unique
