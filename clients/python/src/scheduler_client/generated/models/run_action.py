from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.run_action_action import RunActionAction
from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
    from ..models.run_filter import RunFilter


T = TypeVar("T", bound="RunAction")


@_attrs_define
class RunAction:
    """
    Attributes:
        action (RunActionAction): cancel: pending, dispatched or running runs; retry: failed, cancelled or expired runs
            (like POST /runs/{id}/retry, within the tenant's backlog quota).
        cursor (None | str | Unset): A next_cursor from the previous answer: go on from there.
        filter_ (RunFilter | Unset):
        limit (int | Unset): At most this many matching runs per request. Default: 1000.
    """

    action: RunActionAction
    cursor: None | str | Unset = UNSET
    filter_: RunFilter | Unset = UNSET
    limit: int | Unset = 1000

    def to_dict(self) -> dict[str, Any]:
        from ..models.run_filter import RunFilter  # noqa: PLC0415

        action = self.action.value

        cursor: None | str | Unset
        if isinstance(self.cursor, Unset):
            cursor = UNSET
        else:
            cursor = self.cursor

        filter_: dict[str, Any] | Unset = UNSET
        if not isinstance(self.filter_, Unset):
            filter_ = self.filter_.to_dict()

        limit = self.limit

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "action": action,
            }
        )
        if cursor is not UNSET:
            field_dict["cursor"] = cursor
        if filter_ is not UNSET:
            field_dict["filter"] = filter_
        if limit is not UNSET:
            field_dict["limit"] = limit

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.run_filter import RunFilter  # noqa: PLC0415

        d = dict(src_dict)
        action = RunActionAction(d.pop("action"))

        def _parse_cursor(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        cursor = _parse_cursor(d.pop("cursor", UNSET))

        _filter_ = d.pop("filter", UNSET)
        filter_: RunFilter | Unset
        if isinstance(_filter_, Unset):
            filter_ = UNSET
        else:
            filter_ = RunFilter.from_dict(_filter_)

        limit = d.pop("limit", UNSET)

        run_action = cls(
            action=action,
            cursor=cursor,
            filter_=filter_,
            limit=limit,
        )

        return run_action
