from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
    from ..models.group_callback import GroupCallback
    from ..models.on_complete_payload_type_0 import OnCompletePayloadType0


T = TypeVar("T", bound="OnComplete")


@_attrs_define
class OnComplete:
    """Exactly one of `job` (with its `payload`) or `callback`.

    Attributes:
        callback (GroupCallback | None | Unset): Told once the group completes, instead of a run.
        job (None | str | Unset): A job of the tenant: one run of it is submitted once the group completes, its payload
            `payload` with `group` (id, name, total and a count per terminal status) set in it.
        payload (None | OnCompletePayloadType0 | Unset): The completion run's payload, a JSON object (default {}). Any
            JSON, at most SCHEDULER_MAX_PAYLOAD_BYTES (65536) encoded, without NUL characters.
    """

    callback: GroupCallback | None | Unset = UNSET
    job: None | str | Unset = UNSET
    payload: None | OnCompletePayloadType0 | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.group_callback import GroupCallback  # noqa: PLC0415
        from ..models.on_complete_payload_type_0 import OnCompletePayloadType0  # noqa: PLC0415

        callback: dict[str, Any] | None | Unset
        if isinstance(self.callback, Unset):
            callback = UNSET
        elif isinstance(self.callback, GroupCallback):
            callback = self.callback.to_dict()
        else:
            callback = self.callback

        job: None | str | Unset
        if isinstance(self.job, Unset):
            job = UNSET
        else:
            job = self.job

        payload: dict[str, Any] | None | Unset
        if isinstance(self.payload, Unset):
            payload = UNSET
        elif isinstance(self.payload, OnCompletePayloadType0):
            payload = self.payload.to_dict()
        else:
            payload = self.payload

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if callback is not UNSET:
            field_dict["callback"] = callback
        if job is not UNSET:
            field_dict["job"] = job
        if payload is not UNSET:
            field_dict["payload"] = payload

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.group_callback import GroupCallback  # noqa: PLC0415
        from ..models.on_complete_payload_type_0 import OnCompletePayloadType0  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_callback(data: object) -> GroupCallback | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                callback_type_0 = GroupCallback.from_dict(data)

                return callback_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(GroupCallback | None | Unset, data)

        callback = _parse_callback(d.pop("callback", UNSET))

        def _parse_job(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        job = _parse_job(d.pop("job", UNSET))

        def _parse_payload(data: object) -> None | OnCompletePayloadType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                payload_type_0 = OnCompletePayloadType0.from_dict(data)

                return payload_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | OnCompletePayloadType0 | Unset, data)

        payload = _parse_payload(d.pop("payload", UNSET))

        on_complete = cls(
            callback=callback,
            job=job,
            payload=payload,
        )

        return on_complete
