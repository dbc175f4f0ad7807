from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast
import datetime


T = TypeVar("T", bound="Tenant")


@_attrs_define
class Tenant:
    """
    Attributes:
        created_at (datetime.datetime):
        id (str):
        in_flight (int | None): The tenant's runs holding its slot now (null while it has no max_in_flight). It can
            exceed max_in_flight just after the limit is lowered: running work is never stopped.
        max_in_flight (int | None): At most this many of the tenant's runs hold an in-flight slot at a time, from their
            claim until their attempt ends, is reaped or is cancelled, across every engine and worker; the others wait
            pending with `held: "concurrency"`. null: no limit.
        paused (bool):
    """

    created_at: datetime.datetime
    id: str
    in_flight: int | None
    max_in_flight: int | None
    paused: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        id = self.id

        in_flight: int | None
        in_flight = self.in_flight

        max_in_flight: int | None
        max_in_flight = self.max_in_flight

        paused = self.paused

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "id": id,
                "in_flight": in_flight,
                "max_in_flight": max_in_flight,
                "paused": paused,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        id = d.pop("id")

        def _parse_in_flight(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        in_flight = _parse_in_flight(d.pop("in_flight"))

        def _parse_max_in_flight(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        max_in_flight = _parse_max_in_flight(d.pop("max_in_flight"))

        paused = d.pop("paused")

        tenant = cls(
            created_at=created_at,
            id=id,
            in_flight=in_flight,
            max_in_flight=max_in_flight,
            paused=paused,
        )

        tenant.additional_properties = d
        return tenant

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
