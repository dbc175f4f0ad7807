from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.callback_state_on_item import CallbackStateOnItem
from ..models.callback_state_status_type_0 import CallbackStateStatusType0
from ..types import UNSET, Unset
from typing import cast


T = TypeVar("T", bound="CallbackState")


@_attrs_define
class CallbackState:
    """
    Attributes:
        attempts (int): Deliveries attempted so far.
        last_error (None | str): Why the latest failed attempt failed.
        status (CallbackStateStatusType0 | None): null until the run ends in one of `on`; then pending (due),
            delivering, delivered, or failed (every attempt failed).
        url (str): Receives the finished run (POST, signed like webhooks). Its host must resolve to public addresses.
        on (list[CallbackStateOnItem] | Unset): The terminal statuses that trigger it; default all four.
    """

    attempts: int
    last_error: None | str
    status: CallbackStateStatusType0 | None
    url: str
    on: list[CallbackStateOnItem] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        attempts = self.attempts

        last_error: None | str
        last_error = self.last_error

        status: None | str
        if isinstance(self.status, CallbackStateStatusType0):
            status = self.status.value
        else:
            status = self.status

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
                "attempts": attempts,
                "last_error": last_error,
                "status": status,
                "url": url,
            }
        )
        if on is not UNSET:
            field_dict["on"] = on

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        attempts = d.pop("attempts")

        def _parse_last_error(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        last_error = _parse_last_error(d.pop("last_error"))

        def _parse_status(data: object) -> CallbackStateStatusType0 | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                status_type_0 = CallbackStateStatusType0(data)

                return status_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CallbackStateStatusType0 | None, data)

        status = _parse_status(d.pop("status"))

        url = d.pop("url")

        _on = d.pop("on", UNSET)
        on: list[CallbackStateOnItem] | Unset = UNSET
        if _on is not UNSET:
            on = []
            for on_item_data in _on:
                on_item = CallbackStateOnItem(on_item_data)

                on.append(on_item)

        callback_state = cls(
            attempts=attempts,
            last_error=last_error,
            status=status,
            url=url,
            on=on,
        )

        return callback_state
