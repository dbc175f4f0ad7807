from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast


T = TypeVar("T", bound="Problem")


@_attrs_define
class Problem:
    """An error, as RFC 9457 problem details, served as application/problem+json.

    Attributes:
        code (str): Stable, for programs: invalid_input, unauthorized, forbidden, not_found, conflict,
            payload_too_large, over_quota, method_not_allowed, internal_error, unavailable. New codes may be added.
        detail (str): What went wrong, for a person.
        status (int):
        title (str): The status's phrase, e.g. Unprocessable Content.
        field (None | str | Unset): The input at fault, e.g. runs[3].scheduled_at or Authorization.
        type_ (str | Unset): `about:blank`: each problem means what its status means; `code` names the kind. Default:
            'about:blank'.
    """

    code: str
    detail: str
    status: int
    title: str
    field: None | str | Unset = UNSET
    type_: str | Unset = "about:blank"
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        code = self.code

        detail = self.detail

        status = self.status

        title = self.title

        field: None | str | Unset
        if isinstance(self.field, Unset):
            field = UNSET
        else:
            field = self.field

        type_ = self.type_

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "code": code,
                "detail": detail,
                "status": status,
                "title": title,
            }
        )
        if field is not UNSET:
            field_dict["field"] = field
        if type_ is not UNSET:
            field_dict["type"] = type_

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        code = d.pop("code")

        detail = d.pop("detail")

        status = d.pop("status")

        title = d.pop("title")

        def _parse_field(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        field = _parse_field(d.pop("field", UNSET))

        type_ = d.pop("type", UNSET)

        problem = cls(
            code=code,
            detail=detail,
            status=status,
            title=title,
            field=field,
            type_=type_,
        )

        problem.additional_properties = d
        return problem

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
