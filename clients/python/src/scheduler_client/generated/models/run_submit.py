from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast
import datetime

if TYPE_CHECKING:
    from ..models.callback import Callback


T = TypeVar("T", bound="RunSubmit")


@_attrs_define
class RunSubmit:
    """
    Attributes:
        job (str):
        callback (Callback | None | Unset): Default: the job's callback.
        idempotency_key (None | str | Unset):
        payload (Any | Unset): Default: the job's payload. Any JSON, at most SCHEDULER_MAX_PAYLOAD_BYTES (65536)
            encoded, without NUL characters.
        priority (int | None | Unset): Default: the job's priority. 0 (most urgent) to 9 (least); among due runs, a more
            urgent one is claimed first.
        scheduled_at (datetime.datetime | None | Unset): ISO 8601 with a timezone; default now (the database's clock).
            At most SCHEDULER_MAX_SCHEDULE_AHEAD_DAYS (366) ahead and SCHEDULER_MAX_SCHEDULE_BEHIND_DAYS (7) behind.
    """

    job: str
    callback: Callback | None | Unset = UNSET
    idempotency_key: None | str | Unset = UNSET
    payload: Any | Unset = UNSET
    priority: int | None | Unset = UNSET
    scheduled_at: datetime.datetime | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.callback import Callback  # noqa: PLC0415

        job = self.job

        callback: dict[str, Any] | None | Unset
        if isinstance(self.callback, Unset):
            callback = UNSET
        elif isinstance(self.callback, Callback):
            callback = self.callback.to_dict()
        else:
            callback = self.callback

        idempotency_key: None | str | Unset
        if isinstance(self.idempotency_key, Unset):
            idempotency_key = UNSET
        else:
            idempotency_key = self.idempotency_key

        payload = self.payload

        priority: int | None | Unset
        if isinstance(self.priority, Unset):
            priority = UNSET
        else:
            priority = self.priority

        scheduled_at: None | str | Unset
        if isinstance(self.scheduled_at, Unset):
            scheduled_at = UNSET
        elif isinstance(self.scheduled_at, datetime.datetime):
            scheduled_at = self.scheduled_at.isoformat()
        else:
            scheduled_at = self.scheduled_at

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "job": job,
            }
        )
        if callback is not UNSET:
            field_dict["callback"] = callback
        if idempotency_key is not UNSET:
            field_dict["idempotency_key"] = idempotency_key
        if payload is not UNSET:
            field_dict["payload"] = payload
        if priority is not UNSET:
            field_dict["priority"] = priority
        if scheduled_at is not UNSET:
            field_dict["scheduled_at"] = scheduled_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.callback import Callback  # noqa: PLC0415

        d = dict(src_dict)
        job = d.pop("job")

        def _parse_callback(data: object) -> Callback | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                callback_type_0 = Callback.from_dict(data)

                return callback_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Callback | None | Unset, data)

        callback = _parse_callback(d.pop("callback", UNSET))

        def _parse_idempotency_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        idempotency_key = _parse_idempotency_key(d.pop("idempotency_key", UNSET))

        payload = d.pop("payload", UNSET)

        def _parse_priority(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        priority = _parse_priority(d.pop("priority", UNSET))

        def _parse_scheduled_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                scheduled_at_type_0 = datetime.datetime.fromisoformat(data)

                return scheduled_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        scheduled_at = _parse_scheduled_at(d.pop("scheduled_at", UNSET))

        run_submit = cls(
            job=job,
            callback=callback,
            idempotency_key=idempotency_key,
            payload=payload,
            priority=priority,
            scheduled_at=scheduled_at,
        )

        return run_submit
