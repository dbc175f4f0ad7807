from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast


T = TypeVar("T", bound="TenantPatch")


@_attrs_define
class TenantPatch:
    """
    Attributes:
        max_in_flight (int | None): At most this many of the tenant's runs hold an in-flight slot at a time, from their
            claim until their attempt ends, is reaped or is cancelled, across every engine and worker; the others wait
            pending with `held: "concurrency"`. null: no limit.
    """

    max_in_flight: int | None

    def to_dict(self) -> dict[str, Any]:
        max_in_flight: int | None
        max_in_flight = self.max_in_flight

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "max_in_flight": max_in_flight,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_max_in_flight(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        max_in_flight = _parse_max_in_flight(d.pop("max_in_flight"))

        tenant_patch = cls(
            max_in_flight=max_in_flight,
        )

        return tenant_patch
