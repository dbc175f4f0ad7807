from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.callback_on_item import CallbackOnItem
from ..types import UNSET, Unset
from typing import cast


T = TypeVar("T", bound="Callback")


@_attrs_define
class Callback:
    """
    Attributes:
        url (str): Receives the finished run (POST, signed like webhooks). Its host must resolve to public addresses.
        on (list[CallbackOnItem] | Unset): The terminal statuses that trigger it; default all four.
    """

    url: str
    on: list[CallbackOnItem] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        url = self.url

        on: list[str] | Unset = UNSET
        if not isinstance(self.on, Unset):
            on = []
            for on_item_data in self.on:
                on_item = on_item_data.value
                on.append(on_item)

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "url": url,
            }
        )
        if on is not UNSET:
            field_dict["on"] = on

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        url = d.pop("url")

        _on = d.pop("on", UNSET)
        on: list[CallbackOnItem] | Unset = UNSET
        if _on is not UNSET:
            on = []
            for on_item_data in _on:
                on_item = CallbackOnItem(on_item_data)

                on.append(on_item)

        callback = cls(
            url=url,
            on=on,
        )

        return callback
