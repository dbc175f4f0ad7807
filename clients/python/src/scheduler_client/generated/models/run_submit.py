from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.run_submit_on_parent_failure import RunSubmitOnParentFailure
from ..types import UNSET, Unset
from typing import cast
import datetime

if TYPE_CHECKING:
    from ..models.callback import Callback
    from ..models.group_ref import GroupRef
    from ..models.run_submit_metadata_type_0 import RunSubmitMetadataType0


T = TypeVar("T", bound="RunSubmit")


@_attrs_define
class RunSubmit:
    """
    Attributes:
        job (str):
        callback (Callback | None | Unset): Default: the job's callback.
        depends_on (list[str] | None | Unset): At most 100 parents: ids of runs of this tenant, or refs of EARLIER items
            of the same batch. The run is held (`held: dependencies`) until every parent has succeeded.
        expires_at (datetime.datetime | None | Unset): ISO 8601 with a timezone: the run's deadline to start. Not
            started by then, it ends `expired` (no attempt made) wherever it waits: pending, held or dispatched. At least 1
            s and at most 31 days after scheduled_at (now when absent). Default: the job's expire_after_seconds after
            scheduled_at, or none.
        group (GroupRef | None | Unset): An open group of the tenant the run joins (a completed one is 409). Only on a
            single submission: a batch names its group beside its runs.
        idempotency_key (None | str | Unset):
        metadata (None | RunSubmitMetadataType0 | Unset): Kept with the run, shown with it and sent in its callback. A
            JSON object, at most 4096 bytes encoded, nested no deeper than a payload, without NUL characters.
        on_parent_failure (RunSubmitOnParentFailure | Unset): When a parent ends failed, cancelled or expired: `cancel`
            this run (and, transitively, its own dependents), or `run` it once every parent has ended. Default:
            RunSubmitOnParentFailure.CANCEL.
        pass_results (bool | Unset): Deliver each parent's result beside the payload, under `parents`
            (docs/dependencies.md). Default: False.
        payload (Any | Unset): Default: the job's payload. Any JSON, at most SCHEDULER_MAX_PAYLOAD_BYTES (65536)
            encoded, without NUL characters.
        priority (int | None | Unset): Default: the job's priority. 0 (most urgent) to 9 (least); among due runs, a more
            urgent one is claimed first.
        ref (None | str | Unset): A name for this item within its batch, so that later items can name it in `depends_on`
            (unique within the batch, not a run id). Not stored beyond the edge: a dependent that passes results receives
            this parent's result under it.
        scheduled_at (datetime.datetime | None | Unset): ISO 8601 with a timezone; default now (the database's clock).
            At most SCHEDULER_MAX_SCHEDULE_AHEAD_DAYS (366) ahead and SCHEDULER_MAX_SCHEDULE_BEHIND_DAYS (7) behind.
        tags (list[str] | None | Unset): Added to the job's default tags (together at most 10). At most 10 tags of 1 to
            64 characters from A-Z a-z 0-9 _ . : / -; a repeated one counts once.
    """

    job: str
    callback: Callback | None | Unset = UNSET
    depends_on: list[str] | None | Unset = UNSET
    expires_at: datetime.datetime | None | Unset = UNSET
    group: GroupRef | None | Unset = UNSET
    idempotency_key: None | str | Unset = UNSET
    metadata: None | RunSubmitMetadataType0 | Unset = UNSET
    on_parent_failure: RunSubmitOnParentFailure | Unset = RunSubmitOnParentFailure.CANCEL
    pass_results: bool | Unset = False
    payload: Any | Unset = UNSET
    priority: int | None | Unset = UNSET
    ref: None | str | Unset = UNSET
    scheduled_at: datetime.datetime | None | Unset = UNSET
    tags: list[str] | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.callback import Callback  # noqa: PLC0415
        from ..models.group_ref import GroupRef  # noqa: PLC0415
        from ..models.run_submit_metadata_type_0 import RunSubmitMetadataType0  # noqa: PLC0415

        job = self.job

        callback: dict[str, Any] | None | Unset
        if isinstance(self.callback, Unset):
            callback = UNSET
        elif isinstance(self.callback, Callback):
            callback = self.callback.to_dict()
        else:
            callback = self.callback

        depends_on: list[str] | None | Unset
        if isinstance(self.depends_on, Unset):
            depends_on = UNSET
        elif isinstance(self.depends_on, list):
            depends_on = self.depends_on

        else:
            depends_on = self.depends_on

        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        elif isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        group: dict[str, Any] | None | Unset
        if isinstance(self.group, Unset):
            group = UNSET
        elif isinstance(self.group, GroupRef):
            group = self.group.to_dict()
        else:
            group = self.group

        idempotency_key: None | str | Unset
        if isinstance(self.idempotency_key, Unset):
            idempotency_key = UNSET
        else:
            idempotency_key = self.idempotency_key

        metadata: dict[str, Any] | None | Unset
        if isinstance(self.metadata, Unset):
            metadata = UNSET
        elif isinstance(self.metadata, RunSubmitMetadataType0):
            metadata = self.metadata.to_dict()
        else:
            metadata = self.metadata

        on_parent_failure: str | Unset = UNSET
        if not isinstance(self.on_parent_failure, Unset):
            on_parent_failure = self.on_parent_failure.value

        pass_results = self.pass_results

        payload = self.payload

        priority: int | None | Unset
        if isinstance(self.priority, Unset):
            priority = UNSET
        else:
            priority = self.priority

        ref: None | str | Unset
        if isinstance(self.ref, Unset):
            ref = UNSET
        else:
            ref = self.ref

        scheduled_at: None | str | Unset
        if isinstance(self.scheduled_at, Unset):
            scheduled_at = UNSET
        elif isinstance(self.scheduled_at, datetime.datetime):
            scheduled_at = self.scheduled_at.isoformat()
        else:
            scheduled_at = self.scheduled_at

        tags: list[str] | None | Unset
        if isinstance(self.tags, Unset):
            tags = UNSET
        elif isinstance(self.tags, list):
            tags = self.tags

        else:
            tags = self.tags

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "job": job,
            }
        )
        if callback is not UNSET:
            field_dict["callback"] = callback
        if depends_on is not UNSET:
            field_dict["depends_on"] = depends_on
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at
        if group is not UNSET:
            field_dict["group"] = group
        if idempotency_key is not UNSET:
            field_dict["idempotency_key"] = idempotency_key
        if metadata is not UNSET:
            field_dict["metadata"] = metadata
        if on_parent_failure is not UNSET:
            field_dict["on_parent_failure"] = on_parent_failure
        if pass_results is not UNSET:
            field_dict["pass_results"] = pass_results
        if payload is not UNSET:
            field_dict["payload"] = payload
        if priority is not UNSET:
            field_dict["priority"] = priority
        if ref is not UNSET:
            field_dict["ref"] = ref
        if scheduled_at is not UNSET:
            field_dict["scheduled_at"] = scheduled_at
        if tags is not UNSET:
            field_dict["tags"] = tags

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.callback import Callback  # noqa: PLC0415
        from ..models.group_ref import GroupRef  # noqa: PLC0415
        from ..models.run_submit_metadata_type_0 import RunSubmitMetadataType0  # noqa: PLC0415

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

        def _parse_depends_on(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                depends_on_type_0 = cast(list[str], data)

                return depends_on_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        depends_on = _parse_depends_on(d.pop("depends_on", UNSET))

        def _parse_expires_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                expires_at_type_0 = datetime.datetime.fromisoformat(data)

                return expires_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        expires_at = _parse_expires_at(d.pop("expires_at", UNSET))

        def _parse_group(data: object) -> GroupRef | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                group_type_0 = GroupRef.from_dict(data)

                return group_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(GroupRef | None | Unset, data)

        group = _parse_group(d.pop("group", UNSET))

        def _parse_idempotency_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        idempotency_key = _parse_idempotency_key(d.pop("idempotency_key", UNSET))

        def _parse_metadata(data: object) -> None | RunSubmitMetadataType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                metadata_type_0 = RunSubmitMetadataType0.from_dict(data)

                return metadata_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RunSubmitMetadataType0 | Unset, data)

        metadata = _parse_metadata(d.pop("metadata", UNSET))

        _on_parent_failure = d.pop("on_parent_failure", UNSET)
        on_parent_failure: RunSubmitOnParentFailure | Unset
        if isinstance(_on_parent_failure, Unset):
            on_parent_failure = UNSET
        else:
            on_parent_failure = RunSubmitOnParentFailure(_on_parent_failure)

        pass_results = d.pop("pass_results", UNSET)

        payload = d.pop("payload", UNSET)

        def _parse_priority(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        priority = _parse_priority(d.pop("priority", UNSET))

        def _parse_ref(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        ref = _parse_ref(d.pop("ref", UNSET))

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

        run_submit = cls(
            job=job,
            callback=callback,
            depends_on=depends_on,
            expires_at=expires_at,
            group=group,
            idempotency_key=idempotency_key,
            metadata=metadata,
            on_parent_failure=on_parent_failure,
            pass_results=pass_results,
            payload=payload,
            priority=priority,
            ref=ref,
            scheduled_at=scheduled_at,
            tags=tags,
        )

        return run_submit
