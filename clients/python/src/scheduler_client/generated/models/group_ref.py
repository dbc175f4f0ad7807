from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from uuid import UUID


T = TypeVar("T", bound="GroupRef")


@_attrs_define
class GroupRef:
    """
    Attributes:
        id (UUID): An open group of the tenant: the run joins it.
    """

    id: UUID

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "id": id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = UUID(d.pop("id"))

        group_ref = cls(
            id=id,
        )

        return group_ref
