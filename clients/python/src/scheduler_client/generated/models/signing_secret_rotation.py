from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast


T = TypeVar("T", bound="SigningSecretRotation")


@_attrs_define
class SigningSecretRotation:
    """
    Attributes:
        overlap_seconds (float | None | Unset): How long the previous secret keeps signing beside the new one; default
            SCHEDULER_SIGNING_SECRET_OVERLAP_SECONDS. 0 retires it at once (a leaked secret).
    """

    overlap_seconds: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        overlap_seconds: float | None | Unset
        if isinstance(self.overlap_seconds, Unset):
            overlap_seconds = UNSET
        else:
            overlap_seconds = self.overlap_seconds

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if overlap_seconds is not UNSET:
            field_dict["overlap_seconds"] = overlap_seconds

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_overlap_seconds(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        overlap_seconds = _parse_overlap_seconds(d.pop("overlap_seconds", UNSET))

        signing_secret_rotation = cls(
            overlap_seconds=overlap_seconds,
        )

        return signing_secret_rotation
