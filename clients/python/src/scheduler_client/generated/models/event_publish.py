from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset


T = TypeVar("T", bound="EventPublish")


@_attrs_define
class EventPublish:
    """
    Attributes:
        payload (Any | Unset): Each run's payload; default: each job's own. Any JSON, at most
            SCHEDULER_MAX_PAYLOAD_BYTES (65536) encoded, without NUL characters.
    """

    payload: Any | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        payload = self.payload

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if payload is not UNSET:
            field_dict["payload"] = payload

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        payload = d.pop("payload", UNSET)

        event_publish = cls(
            payload=payload,
        )

        return event_publish
