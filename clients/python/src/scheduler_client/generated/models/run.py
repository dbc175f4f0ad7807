from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.run_held_type_0 import RunHeldType0
from ..models.run_status import RunStatus
from typing import cast
from uuid import UUID
import datetime

if TYPE_CHECKING:
    from ..models.attempt import Attempt
    from ..models.callback_state import CallbackState
    from ..models.run_metadata_type_0 import RunMetadataType0


T = TypeVar("T", bound="Run")


@_attrs_define
class Run:
    """
    Attributes:
        attempt (int):
        attempts (list[Attempt]): Every attempt, oldest first, at most max_attempts of them (the newest kept).
        callback (CallbackState | None): The callback this run was submitted with and its delivery: after the run ends
            in one of `on`, the run as this route answers it is POSTed to `url`, signed like webhooks, at least once,
            retried with backoff up to a bound.
        created_at (datetime.datetime):
        dedupe_key (None | str): The key this run claimed under its job's `unique` or `debounce` rule: the JSON text of
            the payload field the rule names (`null` when the payload lacks it; over 200 characters, `sha256:` and its
            hash), or `""` when the rule names none. Null when the job had no rule.
        dependents (int): How many runs were submitted depending on this one.
        depends_on (list[UUID]): The ids of the runs this run waits for, as submitted.
        dispatched_at (datetime.datetime | None):
        due_at (datetime.datetime):
        epoch (int):
        expires_at (datetime.datetime | None): The run's deadline to start: not started by then, it ends `expired`.
            Null: none. Once started, the run has met it (a later retry of a failed attempt is not expired).
        finished_at (datetime.datetime | None):
        group_id (None | UUID): The group the run is in (GET /tenants/{tenant_id}/groups/{group_id}), or null.
        held (None | RunHeldType0): Why a pending run is held back: its job or tenant is `paused`, it waits for a
            `concurrency` slot (of its job's key, of its tenant's max_in_flight, or both), or for room in its key's
            `rate_limit` window, or for its parents to succeed (`dependencies`). due_at then says when it would be due: for
            `rate_limit`, not before its key's window next has room.
        id (UUID):
        idempotency_key (None | str):
        job (str):
        last_error (None | str):
        max_attempts (int):
        metadata (None | RunMetadataType0): The submission's metadata, as sent.
        payload (Any):
        priority (int):
        result (Any): What the last successful attempt returned: a python handler's value, a webhook's body (JSON if it
            is application/json and parses, else its text). Over SCHEDULER_MAX_RESULT_BYTES (64 KiB) it is the first bytes
            of its JSON text, as a string; JSON beyond a payload's bounds (nested deeper than SCHEDULER_MAX_PAYLOAD_DEPTH
            (32), an integer beyond 64 bits, a number beyond a double) is its text, as a string.
        result_truncated (bool): The result is not the value as returned: cut to SCHEDULER_MAX_RESULT_BYTES, or JSON
            beyond a payload's bounds kept as its text.
        scheduled_at (datetime.datetime):
        started_at (datetime.datetime | None):
        status (RunStatus):
        tags (list[str]): The job's default tags, then the submission's own.
        tenant_id (str):
    """

    attempt: int
    attempts: list[Attempt]
    callback: CallbackState | None
    created_at: datetime.datetime
    dedupe_key: None | str
    dependents: int
    depends_on: list[UUID]
    dispatched_at: datetime.datetime | None
    due_at: datetime.datetime
    epoch: int
    expires_at: datetime.datetime | None
    finished_at: datetime.datetime | None
    group_id: None | UUID
    held: None | RunHeldType0
    id: UUID
    idempotency_key: None | str
    job: str
    last_error: None | str
    max_attempts: int
    metadata: None | RunMetadataType0
    payload: Any
    priority: int
    result: Any
    result_truncated: bool
    scheduled_at: datetime.datetime
    started_at: datetime.datetime | None
    status: RunStatus
    tags: list[str]
    tenant_id: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.attempt import Attempt  # noqa: PLC0415
        from ..models.callback_state import CallbackState  # noqa: PLC0415
        from ..models.run_metadata_type_0 import RunMetadataType0  # noqa: PLC0415

        attempt = self.attempt

        attempts = []
        for attempts_item_data in self.attempts:
            attempts_item = attempts_item_data.to_dict()
            attempts.append(attempts_item)

        callback: dict[str, Any] | None
        if isinstance(self.callback, CallbackState):
            callback = self.callback.to_dict()
        else:
            callback = self.callback

        created_at = self.created_at.isoformat()

        dedupe_key: None | str
        dedupe_key = self.dedupe_key

        dependents = self.dependents

        depends_on = []
        for depends_on_item_data in self.depends_on:
            depends_on_item = str(depends_on_item_data)
            depends_on.append(depends_on_item)

        dispatched_at: None | str
        if isinstance(self.dispatched_at, datetime.datetime):
            dispatched_at = self.dispatched_at.isoformat()
        else:
            dispatched_at = self.dispatched_at

        due_at = self.due_at.isoformat()

        epoch = self.epoch

        expires_at: None | str
        if isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        finished_at: None | str
        if isinstance(self.finished_at, datetime.datetime):
            finished_at = self.finished_at.isoformat()
        else:
            finished_at = self.finished_at

        group_id: None | str
        if isinstance(self.group_id, UUID):
            group_id = str(self.group_id)
        else:
            group_id = self.group_id

        held: None | str
        if isinstance(self.held, RunHeldType0):
            held = self.held.value
        else:
            held = self.held

        id = str(self.id)

        idempotency_key: None | str
        idempotency_key = self.idempotency_key

        job = self.job

        last_error: None | str
        last_error = self.last_error

        max_attempts = self.max_attempts

        metadata: dict[str, Any] | None
        if isinstance(self.metadata, RunMetadataType0):
            metadata = self.metadata.to_dict()
        else:
            metadata = self.metadata

        payload = self.payload

        priority = self.priority

        result = self.result

        result_truncated = self.result_truncated

        scheduled_at = self.scheduled_at.isoformat()

        started_at: None | str
        if isinstance(self.started_at, datetime.datetime):
            started_at = self.started_at.isoformat()
        else:
            started_at = self.started_at

        status = self.status.value

        tags = self.tags

        tenant_id = self.tenant_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "attempt": attempt,
                "attempts": attempts,
                "callback": callback,
                "created_at": created_at,
                "dedupe_key": dedupe_key,
                "dependents": dependents,
                "depends_on": depends_on,
                "dispatched_at": dispatched_at,
                "due_at": due_at,
                "epoch": epoch,
                "expires_at": expires_at,
                "finished_at": finished_at,
                "group_id": group_id,
                "held": held,
                "id": id,
                "idempotency_key": idempotency_key,
                "job": job,
                "last_error": last_error,
                "max_attempts": max_attempts,
                "metadata": metadata,
                "payload": payload,
                "priority": priority,
                "result": result,
                "result_truncated": result_truncated,
                "scheduled_at": scheduled_at,
                "started_at": started_at,
                "status": status,
                "tags": tags,
                "tenant_id": tenant_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.attempt import Attempt  # noqa: PLC0415
        from ..models.callback_state import CallbackState  # noqa: PLC0415
        from ..models.run_metadata_type_0 import RunMetadataType0  # noqa: PLC0415

        d = dict(src_dict)
        attempt = d.pop("attempt")

        attempts = []
        _attempts = d.pop("attempts")
        for attempts_item_data in _attempts:
            attempts_item = Attempt.from_dict(attempts_item_data)

            attempts.append(attempts_item)

        def _parse_callback(data: object) -> CallbackState | None:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                callback_type_0 = CallbackState.from_dict(data)

                return callback_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CallbackState | None, data)

        callback = _parse_callback(d.pop("callback"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        def _parse_dedupe_key(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        dedupe_key = _parse_dedupe_key(d.pop("dedupe_key"))

        dependents = d.pop("dependents")

        depends_on = []
        _depends_on = d.pop("depends_on")
        for depends_on_item_data in _depends_on:
            depends_on_item = UUID(depends_on_item_data)

            depends_on.append(depends_on_item)

        def _parse_dispatched_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                dispatched_at_type_0 = datetime.datetime.fromisoformat(data)

                return dispatched_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        dispatched_at = _parse_dispatched_at(d.pop("dispatched_at"))

        due_at = datetime.datetime.fromisoformat(d.pop("due_at"))

        epoch = d.pop("epoch")

        def _parse_expires_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                expires_at_type_0 = datetime.datetime.fromisoformat(data)

                return expires_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        expires_at = _parse_expires_at(d.pop("expires_at"))

        def _parse_finished_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                finished_at_type_0 = datetime.datetime.fromisoformat(data)

                return finished_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        finished_at = _parse_finished_at(d.pop("finished_at"))

        def _parse_group_id(data: object) -> None | UUID:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                group_id_type_0 = UUID(data)

                return group_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | UUID, data)

        group_id = _parse_group_id(d.pop("group_id"))

        def _parse_held(data: object) -> None | RunHeldType0:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                held_type_0 = RunHeldType0(data)

                return held_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RunHeldType0, data)

        held = _parse_held(d.pop("held"))

        id = UUID(d.pop("id"))

        def _parse_idempotency_key(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        idempotency_key = _parse_idempotency_key(d.pop("idempotency_key"))

        job = d.pop("job")

        def _parse_last_error(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        last_error = _parse_last_error(d.pop("last_error"))

        max_attempts = d.pop("max_attempts")

        def _parse_metadata(data: object) -> None | RunMetadataType0:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                metadata_type_0 = RunMetadataType0.from_dict(data)

                return metadata_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RunMetadataType0, data)

        metadata = _parse_metadata(d.pop("metadata"))

        payload = d.pop("payload")

        priority = d.pop("priority")

        result = d.pop("result")

        result_truncated = d.pop("result_truncated")

        scheduled_at = datetime.datetime.fromisoformat(d.pop("scheduled_at"))

        def _parse_started_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                started_at_type_0 = datetime.datetime.fromisoformat(data)

                return started_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        started_at = _parse_started_at(d.pop("started_at"))

        status = RunStatus(d.pop("status"))

        tags = cast(list[str], d.pop("tags"))

        tenant_id = d.pop("tenant_id")

        run = cls(
            attempt=attempt,
            attempts=attempts,
            callback=callback,
            created_at=created_at,
            dedupe_key=dedupe_key,
            dependents=dependents,
            depends_on=depends_on,
            dispatched_at=dispatched_at,
            due_at=due_at,
            epoch=epoch,
            expires_at=expires_at,
            finished_at=finished_at,
            group_id=group_id,
            held=held,
            id=id,
            idempotency_key=idempotency_key,
            job=job,
            last_error=last_error,
            max_attempts=max_attempts,
            metadata=metadata,
            payload=payload,
            priority=priority,
            result=result,
            result_truncated=result_truncated,
            scheduled_at=scheduled_at,
            started_at=started_at,
            status=status,
            tags=tags,
            tenant_id=tenant_id,
        )

        run.additional_properties = d
        return run

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
