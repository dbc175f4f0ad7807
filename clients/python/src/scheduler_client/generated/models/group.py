from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast
from uuid import UUID
import datetime

if TYPE_CHECKING:
    from ..models.group_callback_state import GroupCallbackState
    from ..models.group_on_complete_type_0 import GroupOnCompleteType0


T = TypeVar("T", bound="Group")


@_attrs_define
class Group:
    """
    Attributes:
        callback (GroupCallbackState | None): on_complete.callback's delivery.
        cancelled (int):
        completed_at (datetime.datetime | None): When its last run ended: every run terminal. Then no run may join it,
            and its counts stay as they were (a run retried afterwards changes nothing).
        completion_run_id (None | UUID): The run on_complete.job made.
        created_at (datetime.datetime):
        expired (int):
        failed (int):
        fire_error (None | str): Why the completion is not made yet (the backlog quota: it is tried again), or was given
            up on (its job no longer exists).
        fired_at (datetime.datetime | None): When its completion run was submitted or its callback queued (seconds after
            completed_at; later while the tenant is over its backlog quota).
        id (UUID):
        name (str):
        on_complete (GroupOnCompleteType0 | None): As submitted: `{job, payload}` or `{callback: {url}}`.
        pending (int): Runs not ended yet (pending, dispatched or running).
        succeeded (int):
        tenant_id (str):
        total (int): Runs in the group.
    """

    callback: GroupCallbackState | None
    cancelled: int
    completed_at: datetime.datetime | None
    completion_run_id: None | UUID
    created_at: datetime.datetime
    expired: int
    failed: int
    fire_error: None | str
    fired_at: datetime.datetime | None
    id: UUID
    name: str
    on_complete: GroupOnCompleteType0 | None
    pending: int
    succeeded: int
    tenant_id: str
    total: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.group_callback_state import GroupCallbackState  # noqa: PLC0415
        from ..models.group_on_complete_type_0 import GroupOnCompleteType0  # noqa: PLC0415

        callback: dict[str, Any] | None
        if isinstance(self.callback, GroupCallbackState):
            callback = self.callback.to_dict()
        else:
            callback = self.callback

        cancelled = self.cancelled

        completed_at: None | str
        if isinstance(self.completed_at, datetime.datetime):
            completed_at = self.completed_at.isoformat()
        else:
            completed_at = self.completed_at

        completion_run_id: None | str
        if isinstance(self.completion_run_id, UUID):
            completion_run_id = str(self.completion_run_id)
        else:
            completion_run_id = self.completion_run_id

        created_at = self.created_at.isoformat()

        expired = self.expired

        failed = self.failed

        fire_error: None | str
        fire_error = self.fire_error

        fired_at: None | str
        if isinstance(self.fired_at, datetime.datetime):
            fired_at = self.fired_at.isoformat()
        else:
            fired_at = self.fired_at

        id = str(self.id)

        name = self.name

        on_complete: dict[str, Any] | None
        if isinstance(self.on_complete, GroupOnCompleteType0):
            on_complete = self.on_complete.to_dict()
        else:
            on_complete = self.on_complete

        pending = self.pending

        succeeded = self.succeeded

        tenant_id = self.tenant_id

        total = self.total

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "callback": callback,
                "cancelled": cancelled,
                "completed_at": completed_at,
                "completion_run_id": completion_run_id,
                "created_at": created_at,
                "expired": expired,
                "failed": failed,
                "fire_error": fire_error,
                "fired_at": fired_at,
                "id": id,
                "name": name,
                "on_complete": on_complete,
                "pending": pending,
                "succeeded": succeeded,
                "tenant_id": tenant_id,
                "total": total,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.group_callback_state import GroupCallbackState  # noqa: PLC0415
        from ..models.group_on_complete_type_0 import GroupOnCompleteType0  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_callback(data: object) -> GroupCallbackState | None:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                callback_type_0 = GroupCallbackState.from_dict(data)

                return callback_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(GroupCallbackState | None, data)

        callback = _parse_callback(d.pop("callback"))

        cancelled = d.pop("cancelled")

        def _parse_completed_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                completed_at_type_0 = datetime.datetime.fromisoformat(data)

                return completed_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        completed_at = _parse_completed_at(d.pop("completed_at"))

        def _parse_completion_run_id(data: object) -> None | UUID:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                completion_run_id_type_0 = UUID(data)

                return completion_run_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | UUID, data)

        completion_run_id = _parse_completion_run_id(d.pop("completion_run_id"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        expired = d.pop("expired")

        failed = d.pop("failed")

        def _parse_fire_error(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        fire_error = _parse_fire_error(d.pop("fire_error"))

        def _parse_fired_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                fired_at_type_0 = datetime.datetime.fromisoformat(data)

                return fired_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        fired_at = _parse_fired_at(d.pop("fired_at"))

        id = UUID(d.pop("id"))

        name = d.pop("name")

        def _parse_on_complete(data: object) -> GroupOnCompleteType0 | None:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                on_complete_type_0 = GroupOnCompleteType0.from_dict(data)

                return on_complete_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(GroupOnCompleteType0 | None, data)

        on_complete = _parse_on_complete(d.pop("on_complete"))

        pending = d.pop("pending")

        succeeded = d.pop("succeeded")

        tenant_id = d.pop("tenant_id")

        total = d.pop("total")

        group = cls(
            callback=callback,
            cancelled=cancelled,
            completed_at=completed_at,
            completion_run_id=completion_run_id,
            created_at=created_at,
            expired=expired,
            failed=failed,
            fire_error=fire_error,
            fired_at=fired_at,
            id=id,
            name=name,
            on_complete=on_complete,
            pending=pending,
            succeeded=succeeded,
            tenant_id=tenant_id,
            total=total,
        )

        group.additional_properties = d
        return group

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
