from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset


T = TypeVar("T", bound="TenantCreated")


@_attrs_define
class TenantCreated:
    """
    Attributes:
        api_key (str): Shown once.
        id (str):
        key_id (str): Names the key for listing and revoking; not a secret.
        signing_secret (str): Verifies webhook calls (Standard Webhooks: `whsec_` + base64). Shown once.
    """

    api_key: str
    id: str
    key_id: str
    signing_secret: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        api_key = self.api_key

        id = self.id

        key_id = self.key_id

        signing_secret = self.signing_secret

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "api_key": api_key,
                "id": id,
                "key_id": key_id,
                "signing_secret": signing_secret,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        api_key = d.pop("api_key")

        id = d.pop("id")

        key_id = d.pop("key_id")

        signing_secret = d.pop("signing_secret")

        tenant_created = cls(
            api_key=api_key,
            id=id,
            key_id=key_id,
            signing_secret=signing_secret,
        )

        tenant_created.additional_properties = d
        return tenant_created

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
