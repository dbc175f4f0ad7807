from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import Literal, cast


T = TypeVar("T", bound="NoopTarget")


@_attrs_define
class NoopTarget:
    """
    Attributes:
        type_ (Literal['noop']):
    """

    type_: Literal["noop"]

    def to_dict(self) -> dict[str, Any]:
        type_ = self.type_

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "type": type_,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        type_ = cast(Literal["noop"], d.pop("type"))
        if type_ != "noop":
            raise ValueError(f"type must match const 'noop', got '{type_}'")

        noop_target = cls(
            type_=type_,
        )

        return noop_target
