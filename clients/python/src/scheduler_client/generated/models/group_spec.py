from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast
from uuid import UUID

if TYPE_CHECKING:
    from ..models.on_complete import OnComplete


T = TypeVar("T", bound="GroupSpec")


@_attrs_define
class GroupSpec:
    """A batch's group: a new one (`name`, optional `on_complete`), or an open one to join (`id`).

    Attributes:
        id (None | Unset | UUID): An open group of the tenant to add the runs to.
        name (None | str | Unset): A new group's name. 1 to 128 characters from A-Z a-z 0-9 _ . : -, starting with a
            letter or digit (as job names).
        on_complete (None | OnComplete | Unset): What a new group's completion does: submit one run, or one callback.
    """

    id: None | Unset | UUID = UNSET
    name: None | str | Unset = UNSET
    on_complete: None | OnComplete | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.on_complete import OnComplete  # noqa: PLC0415

        id: None | str | Unset
        if isinstance(self.id, Unset):
            id = UNSET
        elif isinstance(self.id, UUID):
            id = str(self.id)
        else:
            id = self.id

        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        on_complete: dict[str, Any] | None | Unset
        if isinstance(self.on_complete, Unset):
            on_complete = UNSET
        elif isinstance(self.on_complete, OnComplete):
            on_complete = self.on_complete.to_dict()
        else:
            on_complete = self.on_complete

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if id is not UNSET:
            field_dict["id"] = id
        if name is not UNSET:
            field_dict["name"] = name
        if on_complete is not UNSET:
            field_dict["on_complete"] = on_complete

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.on_complete import OnComplete  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                id_type_0 = UUID(data)

                return id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        id = _parse_id(d.pop("id", UNSET))

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

        def _parse_on_complete(data: object) -> None | OnComplete | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                on_complete_type_0 = OnComplete.from_dict(data)

                return on_complete_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | OnComplete | Unset, data)

        on_complete = _parse_on_complete(d.pop("on_complete", UNSET))

        group_spec = cls(
            id=id,
            name=name,
            on_complete=on_complete,
        )

        return group_spec
