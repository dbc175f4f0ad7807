from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.job_put_misfire import JobPutMisfire
from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
    from ..models.callback import Callback
    from ..models.concurrency import Concurrency
    from ..models.http_target import HttpTarget
    from ..models.noop_target import NoopTarget
    from ..models.python_target import PythonTarget
    from ..models.rate_limit import RateLimit


T = TypeVar("T", bound="JobPut")


@_attrs_define
class JobPut:
    """
    Attributes:
        target (HttpTarget | NoopTarget | PythonTarget): What a run calls: a signed webhook (`http`), a handler the
            deployment registered (`python`), or nothing (`noop`). A webhook's host must resolve to public addresses.
        backoff_seconds (float | Unset):  Default: 10.0.
        callback (Callback | None | Unset): Told when each run ends (see Run.callback); a run may name its own.
        concurrency (Concurrency | None | Unset): A per-key concurrency limit; it applies to runs submitted after it is
            set.
        max_attempts (int | Unset):  Default: 3.
        misfire (JobPutMisfire | Unset):  Default: JobPutMisfire.LATEST.
        paused (bool | Unset): Holds every pending run of the job and its cron (as POST …/pause); false resumes.
            Default: False.
        payload (Any | Unset): Each run's payload unless it brings one. Any JSON, at most SCHEDULER_MAX_PAYLOAD_BYTES
            (65536) encoded, without NUL characters.
        priority (int | Unset): 0 (most urgent) to 9 (least); among due runs, a more urgent one is claimed first.
            Default: 5.
        rate_limit (None | RateLimit | Unset): A per-key rate limit on starts; it applies to runs submitted after it is
            set (a changed one to those waiting too; removing it releases them). Not beside `concurrency`.
        schedule (None | str | Unset):
        timeout_seconds (float | Unset):  Default: 30.0.
        timezone (str | Unset):  Default: 'UTC'.
    """

    target: HttpTarget | NoopTarget | PythonTarget
    backoff_seconds: float | Unset = 10.0
    callback: Callback | None | Unset = UNSET
    concurrency: Concurrency | None | Unset = UNSET
    max_attempts: int | Unset = 3
    misfire: JobPutMisfire | Unset = JobPutMisfire.LATEST
    paused: bool | Unset = False
    payload: Any | Unset = UNSET
    priority: int | Unset = 5
    rate_limit: None | RateLimit | Unset = UNSET
    schedule: None | str | Unset = UNSET
    timeout_seconds: float | Unset = 30.0
    timezone: str | Unset = "UTC"

    def to_dict(self) -> dict[str, Any]:
        from ..models.callback import Callback  # noqa: PLC0415
        from ..models.concurrency import Concurrency  # noqa: PLC0415
        from ..models.http_target import HttpTarget  # noqa: PLC0415
        from ..models.noop_target import NoopTarget  # noqa: PLC0415
        from ..models.python_target import PythonTarget  # noqa: PLC0415
        from ..models.rate_limit import RateLimit  # noqa: PLC0415

        target: dict[str, Any]
        if isinstance(self.target, HttpTarget):
            target = self.target.to_dict()
        elif isinstance(self.target, PythonTarget):
            target = self.target.to_dict()
        else:
            target = self.target.to_dict()

        backoff_seconds = self.backoff_seconds

        callback: dict[str, Any] | None | Unset
        if isinstance(self.callback, Unset):
            callback = UNSET
        elif isinstance(self.callback, Callback):
            callback = self.callback.to_dict()
        else:
            callback = self.callback

        concurrency: dict[str, Any] | None | Unset
        if isinstance(self.concurrency, Unset):
            concurrency = UNSET
        elif isinstance(self.concurrency, Concurrency):
            concurrency = self.concurrency.to_dict()
        else:
            concurrency = self.concurrency

        max_attempts = self.max_attempts

        misfire: str | Unset = UNSET
        if not isinstance(self.misfire, Unset):
            misfire = self.misfire.value

        paused = self.paused

        payload = self.payload

        priority = self.priority

        rate_limit: dict[str, Any] | None | Unset
        if isinstance(self.rate_limit, Unset):
            rate_limit = UNSET
        elif isinstance(self.rate_limit, RateLimit):
            rate_limit = self.rate_limit.to_dict()
        else:
            rate_limit = self.rate_limit

        schedule: None | str | Unset
        if isinstance(self.schedule, Unset):
            schedule = UNSET
        else:
            schedule = self.schedule

        timeout_seconds = self.timeout_seconds

        timezone = self.timezone

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "target": target,
            }
        )
        if backoff_seconds is not UNSET:
            field_dict["backoff_seconds"] = backoff_seconds
        if callback is not UNSET:
            field_dict["callback"] = callback
        if concurrency is not UNSET:
            field_dict["concurrency"] = concurrency
        if max_attempts is not UNSET:
            field_dict["max_attempts"] = max_attempts
        if misfire is not UNSET:
            field_dict["misfire"] = misfire
        if paused is not UNSET:
            field_dict["paused"] = paused
        if payload is not UNSET:
            field_dict["payload"] = payload
        if priority is not UNSET:
            field_dict["priority"] = priority
        if rate_limit is not UNSET:
            field_dict["rate_limit"] = rate_limit
        if schedule is not UNSET:
            field_dict["schedule"] = schedule
        if timeout_seconds is not UNSET:
            field_dict["timeout_seconds"] = timeout_seconds
        if timezone is not UNSET:
            field_dict["timezone"] = timezone

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.callback import Callback  # noqa: PLC0415
        from ..models.concurrency import Concurrency  # noqa: PLC0415
        from ..models.http_target import HttpTarget  # noqa: PLC0415
        from ..models.noop_target import NoopTarget  # noqa: PLC0415
        from ..models.python_target import PythonTarget  # noqa: PLC0415
        from ..models.rate_limit import RateLimit  # noqa: PLC0415

        d = dict(src_dict)

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

        backoff_seconds = d.pop("backoff_seconds", UNSET)

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

        def _parse_concurrency(data: object) -> Concurrency | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                concurrency_type_0 = Concurrency.from_dict(data)

                return concurrency_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Concurrency | None | Unset, data)

        concurrency = _parse_concurrency(d.pop("concurrency", UNSET))

        max_attempts = d.pop("max_attempts", UNSET)

        _misfire = d.pop("misfire", UNSET)
        misfire: JobPutMisfire | Unset
        if isinstance(_misfire, Unset):
            misfire = UNSET
        else:
            misfire = JobPutMisfire(_misfire)

        paused = d.pop("paused", UNSET)

        payload = d.pop("payload", UNSET)

        priority = d.pop("priority", UNSET)

        def _parse_rate_limit(data: object) -> None | RateLimit | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                rate_limit_type_0 = RateLimit.from_dict(data)

                return rate_limit_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RateLimit | Unset, data)

        rate_limit = _parse_rate_limit(d.pop("rate_limit", UNSET))

        def _parse_schedule(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        schedule = _parse_schedule(d.pop("schedule", UNSET))

        timeout_seconds = d.pop("timeout_seconds", UNSET)

        timezone = d.pop("timezone", UNSET)

        job_put = cls(
            target=target,
            backoff_seconds=backoff_seconds,
            callback=callback,
            concurrency=concurrency,
            max_attempts=max_attempts,
            misfire=misfire,
            paused=paused,
            payload=payload,
            priority=priority,
            rate_limit=rate_limit,
            schedule=schedule,
            timeout_seconds=timeout_seconds,
            timezone=timezone,
        )

        return job_put
