from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast
import datetime


T = TypeVar("T", bound="SigningSecretCreated")


@_attrs_define
class SigningSecretCreated:
    """
    Attributes:
        previous_expires_at (datetime.datetime): Until then webhooks carry a signature under the previous secret too.
        signing_secret (str): The new secret (Standard Webhooks: `whsec_` + base64). Shown once.
    """

    previous_expires_at: datetime.datetime
    signing_secret: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        previous_expires_at = self.previous_expires_at.isoformat()

        signing_secret = self.signing_secret

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "previous_expires_at": previous_expires_at,
                "signing_secret": signing_secret,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        previous_expires_at = datetime.datetime.fromisoformat(d.pop("previous_expires_at"))

        signing_secret = d.pop("signing_secret")

        signing_secret_created = cls(
            previous_expires_at=previous_expires_at,
            signing_secret=signing_secret,
        )

        signing_secret_created.additional_properties = d
        return signing_secret_created

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
