from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.run_filter_status_type_0_item import RunFilterStatusType0Item
from ..types import UNSET, Unset
from typing import cast
from uuid import UUID
import datetime


T = TypeVar("T", bound="RunFilter")


@_attrs_define
class RunFilter:
    """
    Attributes:
        ids (list[UUID] | None | Unset):
        job (None | str | Unset):
        scheduled_after (datetime.datetime | None | Unset): scheduled_at >= this.
        scheduled_before (datetime.datetime | None | Unset): scheduled_at < this.
        status (list[RunFilterStatusType0Item] | None | Unset):
        tags (list[str] | None | Unset): Runs carrying every one. At most 10 tags of 1 to 64 characters from A-Z a-z 0-9
            _ . : / -; a repeated one counts once.
    """

    ids: list[UUID] | None | Unset = UNSET
    job: None | str | Unset = UNSET
    scheduled_after: datetime.datetime | None | Unset = UNSET
    scheduled_before: datetime.datetime | None | Unset = UNSET
    status: list[RunFilterStatusType0Item] | None | Unset = UNSET
    tags: list[str] | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        ids: list[str] | None | Unset
        if isinstance(self.ids, Unset):
            ids = UNSET
        elif isinstance(self.ids, list):
            ids = []
            for ids_type_0_item_data in self.ids:
                ids_type_0_item = str(ids_type_0_item_data)
                ids.append(ids_type_0_item)

        else:
            ids = self.ids

        job: None | str | Unset
        if isinstance(self.job, Unset):
            job = UNSET
        else:
            job = self.job

        scheduled_after: None | str | Unset
        if isinstance(self.scheduled_after, Unset):
            scheduled_after = UNSET
        elif isinstance(self.scheduled_after, datetime.datetime):
            scheduled_after = self.scheduled_after.isoformat()
        else:
            scheduled_after = self.scheduled_after

        scheduled_before: None | str | Unset
        if isinstance(self.scheduled_before, Unset):
            scheduled_before = UNSET
        elif isinstance(self.scheduled_before, datetime.datetime):
            scheduled_before = self.scheduled_before.isoformat()
        else:
            scheduled_before = self.scheduled_before

        status: list[str] | None | Unset
        if isinstance(self.status, Unset):
            status = UNSET
        elif isinstance(self.status, list):
            status = []
            for status_type_0_item_data in self.status:
                status_type_0_item = status_type_0_item_data.value
                status.append(status_type_0_item)

        else:
            status = self.status

        tags: list[str] | None | Unset
        if isinstance(self.tags, Unset):
            tags = UNSET
        elif isinstance(self.tags, list):
            tags = self.tags

        else:
            tags = self.tags

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if ids is not UNSET:
            field_dict["ids"] = ids
        if job is not UNSET:
            field_dict["job"] = job
        if scheduled_after is not UNSET:
            field_dict["scheduled_after"] = scheduled_after
        if scheduled_before is not UNSET:
            field_dict["scheduled_before"] = scheduled_before
        if status is not UNSET:
            field_dict["status"] = status
        if tags is not UNSET:
            field_dict["tags"] = tags

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_ids(data: object) -> list[UUID] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                ids_type_0 = []
                _ids_type_0 = data
                for ids_type_0_item_data in _ids_type_0:
                    ids_type_0_item = UUID(ids_type_0_item_data)

                    ids_type_0.append(ids_type_0_item)

                return ids_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[UUID] | None | Unset, data)

        ids = _parse_ids(d.pop("ids", UNSET))

        def _parse_job(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        job = _parse_job(d.pop("job", UNSET))

        def _parse_scheduled_after(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                scheduled_after_type_0 = datetime.datetime.fromisoformat(data)

                return scheduled_after_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        scheduled_after = _parse_scheduled_after(d.pop("scheduled_after", UNSET))

        def _parse_scheduled_before(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                scheduled_before_type_0 = datetime.datetime.fromisoformat(data)

                return scheduled_before_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        scheduled_before = _parse_scheduled_before(d.pop("scheduled_before", UNSET))

        def _parse_status(data: object) -> list[RunFilterStatusType0Item] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                status_type_0 = []
                _status_type_0 = data
                for status_type_0_item_data in _status_type_0:
                    status_type_0_item = RunFilterStatusType0Item(status_type_0_item_data)

                    status_type_0.append(status_type_0_item)

                return status_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[RunFilterStatusType0Item] | None | Unset, data)

        status = _parse_status(d.pop("status", UNSET))

        def _parse_tags(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                tags_type_0 = cast(list[str], data)

                return tags_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        tags = _parse_tags(d.pop("tags", UNSET))

        run_filter = cls(
            ids=ids,
            job=job,
            scheduled_after=scheduled_after,
            scheduled_before=scheduled_before,
            status=status,
            tags=tags,
        )

        return run_filter
