from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.job_overlap import JobOverlap
from ..models.job_paused_reason_type_0 import JobPausedReasonType0
from typing import cast
import datetime

if TYPE_CHECKING:
    from ..models.callback import Callback
    from ..models.concurrency import Concurrency
    from ..models.debounce import Debounce
    from ..models.http_target import HttpTarget
    from ..models.noop_target import NoopTarget
    from ..models.python_target import PythonTarget
    from ..models.rate_limit import RateLimit
    from ..models.unique import Unique


T = TypeVar("T", bound="Job")


@_attrs_define
class Job:
    """
    Attributes:
        backoff_seconds (float):
        callback (Callback | None):
        concurrency (Concurrency | None):
        consecutive_failures (int): Its runs that ended `failed` in a row, counted while pause_after_failures is set.
        created_at (datetime.datetime):
        debounce (Debounce | None):
        expire_after_seconds (float | None):
        in_flight (int): Runs of the job holding a concurrency slot now.
        jitter_seconds (int):
        max_attempts (int):
        misfire (str):
        name (str):
        next_fire_at (datetime.datetime | None):
        on_events (list[str]): The events the job subscribes to.
        overlap (JobOverlap):
        pause_after_failures (int | None):
        paused (bool):
        paused_reason (JobPausedReasonType0 | None): Why the job is paused: `requested` (POST …/pause, the dashboard, a
            PUT) or `failures` (pause_after_failures). Null while it is not paused.
        payload (Any):
        priority (int):
        rate_limit (None | RateLimit):
        schedule (None | str):
        tags (list[str]):
        target (HttpTarget | NoopTarget | PythonTarget):
        tenant_id (str):
        timeout_seconds (float):
        timezone (str):
        unique (None | Unique):
        updated_at (datetime.datetime):
    """

    backoff_seconds: float
    callback: Callback | None
    concurrency: Concurrency | None
    consecutive_failures: int
    created_at: datetime.datetime
    debounce: Debounce | None
    expire_after_seconds: float | None
    in_flight: int
    jitter_seconds: int
    max_attempts: int
    misfire: str
    name: str
    next_fire_at: datetime.datetime | None
    on_events: list[str]
    overlap: JobOverlap
    pause_after_failures: int | None
    paused: bool
    paused_reason: JobPausedReasonType0 | None
    payload: Any
    priority: int
    rate_limit: None | RateLimit
    schedule: None | str
    tags: list[str]
    target: HttpTarget | NoopTarget | PythonTarget
    tenant_id: str
    timeout_seconds: float
    timezone: str
    unique: None | Unique
    updated_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.callback import Callback  # noqa: PLC0415
        from ..models.concurrency import Concurrency  # noqa: PLC0415
        from ..models.debounce import Debounce  # noqa: PLC0415
        from ..models.http_target import HttpTarget  # noqa: PLC0415
        from ..models.noop_target import NoopTarget  # noqa: PLC0415
        from ..models.python_target import PythonTarget  # noqa: PLC0415
        from ..models.rate_limit import RateLimit  # noqa: PLC0415
        from ..models.unique import Unique  # noqa: PLC0415

        backoff_seconds = self.backoff_seconds

        callback: dict[str, Any] | None
        if isinstance(self.callback, Callback):
            callback = self.callback.to_dict()
        else:
            callback = self.callback

        concurrency: dict[str, Any] | None
        if isinstance(self.concurrency, Concurrency):
            concurrency = self.concurrency.to_dict()
        else:
            concurrency = self.concurrency

        consecutive_failures = self.consecutive_failures

        created_at = self.created_at.isoformat()

        debounce: dict[str, Any] | None
        if isinstance(self.debounce, Debounce):
            debounce = self.debounce.to_dict()
        else:
            debounce = self.debounce

        expire_after_seconds: float | None
        expire_after_seconds = self.expire_after_seconds

        in_flight = self.in_flight

        jitter_seconds = self.jitter_seconds

        max_attempts = self.max_attempts

        misfire = self.misfire

        name = self.name

        next_fire_at: None | str
        if isinstance(self.next_fire_at, datetime.datetime):
            next_fire_at = self.next_fire_at.isoformat()
        else:
            next_fire_at = self.next_fire_at

        on_events = self.on_events

        overlap = self.overlap.value

        pause_after_failures: int | None
        pause_after_failures = self.pause_after_failures

        paused = self.paused

        paused_reason: None | str
        if isinstance(self.paused_reason, JobPausedReasonType0):
            paused_reason = self.paused_reason.value
        else:
            paused_reason = self.paused_reason

        payload = self.payload

        priority = self.priority

        rate_limit: dict[str, Any] | None
        if isinstance(self.rate_limit, RateLimit):
            rate_limit = self.rate_limit.to_dict()
        else:
            rate_limit = self.rate_limit

        schedule: None | str
        schedule = self.schedule

        tags = self.tags

        target: dict[str, Any]
        if isinstance(self.target, HttpTarget):
            target = self.target.to_dict()
        elif isinstance(self.target, PythonTarget):
            target = self.target.to_dict()
        else:
            target = self.target.to_dict()

        tenant_id = self.tenant_id

        timeout_seconds = self.timeout_seconds

        timezone = self.timezone

        unique: dict[str, Any] | None
        if isinstance(self.unique, Unique):
            unique = self.unique.to_dict()
        else:
            unique = self.unique

        updated_at = self.updated_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "backoff_seconds": backoff_seconds,
                "callback": callback,
                "concurrency": concurrency,
                "consecutive_failures": consecutive_failures,
                "created_at": created_at,
                "debounce": debounce,
                "expire_after_seconds": expire_after_seconds,
                "in_flight": in_flight,
                "jitter_seconds": jitter_seconds,
                "max_attempts": max_attempts,
                "misfire": misfire,
                "name": name,
                "next_fire_at": next_fire_at,
                "on_events": on_events,
                "overlap": overlap,
                "pause_after_failures": pause_after_failures,
                "paused": paused,
                "paused_reason": paused_reason,
                "payload": payload,
                "priority": priority,
                "rate_limit": rate_limit,
                "schedule": schedule,
                "tags": tags,
                "target": target,
                "tenant_id": tenant_id,
                "timeout_seconds": timeout_seconds,
                "timezone": timezone,
                "unique": unique,
                "updated_at": updated_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.callback import Callback  # noqa: PLC0415
        from ..models.concurrency import Concurrency  # noqa: PLC0415
        from ..models.debounce import Debounce  # noqa: PLC0415
        from ..models.http_target import HttpTarget  # noqa: PLC0415
        from ..models.noop_target import NoopTarget  # noqa: PLC0415
        from ..models.python_target import PythonTarget  # noqa: PLC0415
        from ..models.rate_limit import RateLimit  # noqa: PLC0415
        from ..models.unique import Unique  # noqa: PLC0415

        d = dict(src_dict)
        backoff_seconds = d.pop("backoff_seconds")

        def _parse_callback(data: object) -> Callback | None:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                callback_type_0 = Callback.from_dict(data)

                return callback_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Callback | None, data)

        callback = _parse_callback(d.pop("callback"))

        def _parse_concurrency(data: object) -> Concurrency | None:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                concurrency_type_0 = Concurrency.from_dict(data)

                return concurrency_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Concurrency | None, data)

        concurrency = _parse_concurrency(d.pop("concurrency"))

        consecutive_failures = d.pop("consecutive_failures")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        def _parse_debounce(data: object) -> Debounce | None:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                debounce_type_0 = Debounce.from_dict(data)

                return debounce_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Debounce | None, data)

        debounce = _parse_debounce(d.pop("debounce"))

        def _parse_expire_after_seconds(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        expire_after_seconds = _parse_expire_after_seconds(d.pop("expire_after_seconds"))

        in_flight = d.pop("in_flight")

        jitter_seconds = d.pop("jitter_seconds")

        max_attempts = d.pop("max_attempts")

        misfire = d.pop("misfire")

        name = d.pop("name")

        def _parse_next_fire_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                next_fire_at_type_0 = datetime.datetime.fromisoformat(data)

                return next_fire_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        next_fire_at = _parse_next_fire_at(d.pop("next_fire_at"))

        on_events = cast(list[str], d.pop("on_events"))

        overlap = JobOverlap(d.pop("overlap"))

        def _parse_pause_after_failures(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        pause_after_failures = _parse_pause_after_failures(d.pop("pause_after_failures"))

        paused = d.pop("paused")

        def _parse_paused_reason(data: object) -> JobPausedReasonType0 | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                paused_reason_type_0 = JobPausedReasonType0(data)

                return paused_reason_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(JobPausedReasonType0 | None, data)

        paused_reason = _parse_paused_reason(d.pop("paused_reason"))

        payload = d.pop("payload")

        priority = d.pop("priority")

        def _parse_rate_limit(data: object) -> None | RateLimit:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                rate_limit_type_0 = RateLimit.from_dict(data)

                return rate_limit_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RateLimit, data)

        rate_limit = _parse_rate_limit(d.pop("rate_limit"))

        def _parse_schedule(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        schedule = _parse_schedule(d.pop("schedule"))

        tags = cast(list[str], d.pop("tags"))

        def _parse_target(data: object) -> HttpTarget | NoopTarget | PythonTarget:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                target_type_0 = HttpTarget.from_dict(data)

                return target_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                target_type_1 = PythonTarget.from_dict(data)

                return target_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            target_type_2 = NoopTarget.from_dict(data)

            return target_type_2

        target = _parse_target(d.pop("target"))

        tenant_id = d.pop("tenant_id")

        timeout_seconds = d.pop("timeout_seconds")

        timezone = d.pop("timezone")

        def _parse_unique(data: object) -> None | Unique:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                unique_type_0 = Unique.from_dict(data)

                return unique_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unique, data)

        unique = _parse_unique(d.pop("unique"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        job = cls(
            backoff_seconds=backoff_seconds,
            callback=callback,
            concurrency=concurrency,
            consecutive_failures=consecutive_failures,
            created_at=created_at,
            debounce=debounce,
            expire_after_seconds=expire_after_seconds,
            in_flight=in_flight,
            jitter_seconds=jitter_seconds,
            max_attempts=max_attempts,
            misfire=misfire,
            name=name,
            next_fire_at=next_fire_at,
            on_events=on_events,
            overlap=overlap,
            pause_after_failures=pause_after_failures,
            paused=paused,
            paused_reason=paused_reason,
            payload=payload,
            priority=priority,
            rate_limit=rate_limit,
            schedule=schedule,
            tags=tags,
            target=target,
            tenant_id=tenant_id,
            timeout_seconds=timeout_seconds,
            timezone=timezone,
            unique=unique,
            updated_at=updated_at,
        )

        job.additional_properties = d
        return job

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
