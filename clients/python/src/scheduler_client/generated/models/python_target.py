from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import Literal, cast


T = TypeVar("T", bound="PythonTarget")


@_attrs_define
class PythonTarget:
    """
    Attributes:
        handler (str):
        type_ (Literal['python']):
    """

    handler: str
    type_: Literal["python"]

    def to_dict(self) -> dict[str, Any]:
        handler = self.handler

        type_ = self.type_

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "handler": handler,
                "type": type_,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        handler = d.pop("handler")

        type_ = cast(Literal["python"], d.pop("type"))
        if type_ != "python":
            raise ValueError(f"type must match const 'python', got '{type_}'")

        python_target = cls(
            handler=handler,
            type_=type_,
        )

        return python_target
