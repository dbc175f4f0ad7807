from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.audit_event_action import AuditEventAction
from typing import cast
from uuid import UUID
import datetime

if TYPE_CHECKING:
    from ..models.audit_actor import AuditActor
    from ..models.audit_event_detail import AuditEventDetail


T = TypeVar("T", bound="AuditEvent")


@_attrs_define
class AuditEvent:
    """
    Attributes:
        action (AuditEventAction): What was done, e.g. `job.put` or `runs.bulk_cancelled`.
        actor (AuditActor):
        at (datetime.datetime): When the change was made (it committed with this event).
        detail (AuditEventDetail): Bounded facts of the change; never a payload or a secret.
        id (UUID):
        request_id (str): The request's X-Request-ID (given or made by the API).
        target (str): What it was done to: `tenant:<id>`, `key:<id>`, `job:<name>`, `run:<id>`, or `runs` (a bulk
            action, its filter in detail).
    """

    action: AuditEventAction
    actor: AuditActor
    at: datetime.datetime
    detail: AuditEventDetail
    id: UUID
    request_id: str
    target: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.audit_actor import AuditActor  # noqa: PLC0415
        from ..models.audit_event_detail import AuditEventDetail  # noqa: PLC0415

        action = self.action.value

        actor = self.actor.to_dict()

        at = self.at.isoformat()

        detail = self.detail.to_dict()

        id = str(self.id)

        request_id = self.request_id

        target = self.target

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "action": action,
                "actor": actor,
                "at": at,
                "detail": detail,
                "id": id,
                "request_id": request_id,
                "target": target,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.audit_actor import AuditActor  # noqa: PLC0415
        from ..models.audit_event_detail import AuditEventDetail  # noqa: PLC0415

        d = dict(src_dict)
        action = AuditEventAction(d.pop("action"))

        actor = AuditActor.from_dict(d.pop("actor"))

        at = datetime.datetime.fromisoformat(d.pop("at"))

        detail = AuditEventDetail.from_dict(d.pop("detail"))

        id = UUID(d.pop("id"))

        request_id = d.pop("request_id")

        target = d.pop("target")

        audit_event = cls(
            action=action,
            actor=actor,
            at=at,
            detail=detail,
            id=id,
            request_id=request_id,
            target=target,
        )

        audit_event.additional_properties = d
        return audit_event

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
