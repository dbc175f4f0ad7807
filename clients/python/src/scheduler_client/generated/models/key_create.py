from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.key_create_scopes_item import KeyCreateScopesItem
from ..types import UNSET, Unset
from typing import cast


T = TypeVar("T", bound="KeyCreate")


@_attrs_define
class KeyCreate:
    """
    Attributes:
        scopes (list[KeyCreateScopesItem] | Unset): What the key may do: runs:read, runs:write (submit, cancel, retry,
            reschedule, bulk actions, backfill), jobs:read, jobs:write (define, delete, pause, resume), tenant:admin (keys,
            signing secrets, the audit log). A route the key's scopes do not cover answers 403. Default: every scope. A key
            issues only scopes it holds itself.
    """

    scopes: list[KeyCreateScopesItem] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        scopes: list[str] | Unset = UNSET
        if not isinstance(self.scopes, Unset):
            scopes = []
            for scopes_item_data in self.scopes:
                scopes_item = scopes_item_data.value
                scopes.append(scopes_item)

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if scopes is not UNSET:
            field_dict["scopes"] = scopes

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        _scopes = d.pop("scopes", UNSET)
        scopes: list[KeyCreateScopesItem] | Unset = UNSET
        if _scopes is not UNSET:
            scopes = []
            for scopes_item_data in _scopes:
                scopes_item = KeyCreateScopesItem(scopes_item_data)

                scopes.append(scopes_item)

        key_create = cls(
            scopes=scopes,
        )

        return key_create
