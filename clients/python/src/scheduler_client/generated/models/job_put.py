from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.job_put_misfire import JobPutMisfire
from ..models.job_put_overlap import JobPutOverlap
from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
    from ..models.callback import Callback
    from ..models.concurrency import Concurrency
    from ..models.debounce import Debounce
    from ..models.http_target import HttpTarget
    from ..models.noop_target import NoopTarget
    from ..models.python_target import PythonTarget
    from ..models.rate_limit import RateLimit
    from ..models.unique import Unique


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
        debounce (Debounce | None | Unset): Submissions of one key fold into one pending run, which runs once with the
            latest payload; each is answered with that run (200 after the first).
        expire_after_seconds (float | None | Unset): Each run's deadline to start, this long after its scheduled_at (1 s
            to 31 days), unless the run brings its own expires_at: not started by then, the run ends `expired`. Null: no
            deadline. Applies to runs created after it is set, cron occurrences included.
        jitter_seconds (int | Unset): Each cron occurrence's run is scheduled this much later at most, by an offset of
            the occurrence's own (the same every time it is computed): its scheduled_at is that time. Only with a
            `schedule`. Default: 0.
        max_attempts (int | Unset):  Default: 3.
        misfire (JobPutMisfire | Unset):  Default: JobPutMisfire.LATEST.
        on_events (list[str] | Unset): Events the job subscribes to: POST /tenants/{tenant_id}/events/{name} submits one
            run of every job subscribed to `name`. At most 32, each 1 to 128 characters from A-Z a-z 0-9 _ . : -, starting
            with a letter or digit (as job names).
        overlap (JobPutOverlap | Unset): A cron job's occurrence while its schedule's earlier runs are still live:
            `allow` makes it anyway; `skip` drops it while one is pending, dispatched or running; `buffer_one` drops it
            while one is pending (waiting to start), so at most one waits behind a running one. Decided when the occurrence
            is due; dropped ones are counted in scheduler_cron_occurrences_skipped_total{reason="overlap"}. Only with a
            `schedule`. Default: JobPutOverlap.ALLOW.
        pause_after_failures (int | None | Unset): Pause the job (paused_reason `failures`) once this many of its runs
            in a row end `failed`; a success starts the count again, and so does a resume. Counts runs made while it is set.
        paused (bool | Unset): Holds every pending run of the job and its cron (as POST …/pause); false resumes.
            Default: False.
        payload (Any | Unset): Each run's payload unless it brings one. Any JSON, at most SCHEDULER_MAX_PAYLOAD_BYTES
            (65536) encoded, without NUL characters.
        priority (int | Unset): 0 (most urgent) to 9 (least); among due runs, a more urgent one is claimed first.
            Default: 5.
        rate_limit (None | RateLimit | Unset): A per-key rate limit on starts; it applies to runs submitted after it is
            set (a changed one to those waiting too; removing it releases them). Not beside `concurrency`.
        schedule (None | str | Unset):
        tags (list[str] | Unset): Every run's tags, before those it brings (cron runs carry these). At most 10 tags of 1
            to 64 characters from A-Z a-z 0-9 _ . : / -; a repeated one counts once.
        timeout_seconds (float | Unset):  Default: 30.0.
        timezone (str | Unset):  Default: 'UTC'.
        unique (None | Unique | Unset): At most one run per key: a submission that would make a second is answered 200
            with the run that exists, and writes nothing. Not beside `debounce`.
    """

    target: HttpTarget | NoopTarget | PythonTarget
    backoff_seconds: float | Unset = 10.0
    callback: Callback | None | Unset = UNSET
    concurrency: Concurrency | None | Unset = UNSET
    debounce: Debounce | None | Unset = UNSET
    expire_after_seconds: float | None | Unset = UNSET
    jitter_seconds: int | Unset = 0
    max_attempts: int | Unset = 3
    misfire: JobPutMisfire | Unset = JobPutMisfire.LATEST
    on_events: list[str] | Unset = UNSET
    overlap: JobPutOverlap | Unset = JobPutOverlap.ALLOW
    pause_after_failures: int | None | Unset = UNSET
    paused: bool | Unset = False
    payload: Any | Unset = UNSET
    priority: int | Unset = 5
    rate_limit: None | RateLimit | Unset = UNSET
    schedule: None | str | Unset = UNSET
    tags: list[str] | Unset = UNSET
    timeout_seconds: float | Unset = 30.0
    timezone: str | Unset = "UTC"
    unique: None | Unique | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.callback import Callback  # noqa: PLC0415
        from ..models.concurrency import Concurrency  # noqa: PLC0415
        from ..models.debounce import Debounce  # noqa: PLC0415
        from ..models.http_target import HttpTarget  # noqa: PLC0415
        from ..models.noop_target import NoopTarget  # noqa: PLC0415
        from ..models.python_target import PythonTarget  # noqa: PLC0415
        from ..models.rate_limit import RateLimit  # noqa: PLC0415
        from ..models.unique import Unique  # noqa: PLC0415

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

        debounce: dict[str, Any] | None | Unset
        if isinstance(self.debounce, Unset):
            debounce = UNSET
        elif isinstance(self.debounce, Debounce):
            debounce = self.debounce.to_dict()
        else:
            debounce = self.debounce

        expire_after_seconds: float | None | Unset
        if isinstance(self.expire_after_seconds, Unset):
            expire_after_seconds = UNSET
        else:
            expire_after_seconds = self.expire_after_seconds

        jitter_seconds = self.jitter_seconds

        max_attempts = self.max_attempts

        misfire: str | Unset = UNSET
        if not isinstance(self.misfire, Unset):
            misfire = self.misfire.value

        on_events: list[str] | Unset = UNSET
        if not isinstance(self.on_events, Unset):
            on_events = self.on_events

        overlap: str | Unset = UNSET
        if not isinstance(self.overlap, Unset):
            overlap = self.overlap.value

        pause_after_failures: int | None | Unset
        if isinstance(self.pause_after_failures, Unset):
            pause_after_failures = UNSET
        else:
            pause_after_failures = self.pause_after_failures

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

        tags: list[str] | Unset = UNSET
        if not isinstance(self.tags, Unset):
            tags = self.tags

        timeout_seconds = self.timeout_seconds

        timezone = self.timezone

        unique: dict[str, Any] | None | Unset
        if isinstance(self.unique, Unset):
            unique = UNSET
        elif isinstance(self.unique, Unique):
            unique = self.unique.to_dict()
        else:
            unique = self.unique

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
        if debounce is not UNSET:
            field_dict["debounce"] = debounce
        if expire_after_seconds is not UNSET:
            field_dict["expire_after_seconds"] = expire_after_seconds
        if jitter_seconds is not UNSET:
            field_dict["jitter_seconds"] = jitter_seconds
        if max_attempts is not UNSET:
            field_dict["max_attempts"] = max_attempts
        if misfire is not UNSET:
            field_dict["misfire"] = misfire
        if on_events is not UNSET:
            field_dict["on_events"] = on_events
        if overlap is not UNSET:
            field_dict["overlap"] = overlap
        if pause_after_failures is not UNSET:
            field_dict["pause_after_failures"] = pause_after_failures
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
        if tags is not UNSET:
            field_dict["tags"] = tags
        if timeout_seconds is not UNSET:
            field_dict["timeout_seconds"] = timeout_seconds
        if timezone is not UNSET:
            field_dict["timezone"] = timezone
        if unique is not UNSET:
            field_dict["unique"] = unique

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

        def _parse_debounce(data: object) -> Debounce | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                debounce_type_0 = Debounce.from_dict(data)

                return debounce_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Debounce | None | Unset, data)

        debounce = _parse_debounce(d.pop("debounce", UNSET))

        def _parse_expire_after_seconds(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        expire_after_seconds = _parse_expire_after_seconds(d.pop("expire_after_seconds", UNSET))

        jitter_seconds = d.pop("jitter_seconds", UNSET)

        max_attempts = d.pop("max_attempts", UNSET)

        _misfire = d.pop("misfire", UNSET)
        misfire: JobPutMisfire | Unset
        if isinstance(_misfire, Unset):
            misfire = UNSET
        else:
            misfire = JobPutMisfire(_misfire)

        on_events = cast(list[str], d.pop("on_events", UNSET))

        _overlap = d.pop("overlap", UNSET)
        overlap: JobPutOverlap | Unset
        if isinstance(_overlap, Unset):
            overlap = UNSET
        else:
            overlap = JobPutOverlap(_overlap)

        def _parse_pause_after_failures(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        pause_after_failures = _parse_pause_after_failures(d.pop("pause_after_failures", UNSET))

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

        tags = cast(list[str], d.pop("tags", UNSET))

        timeout_seconds = d.pop("timeout_seconds", UNSET)

        timezone = d.pop("timezone", UNSET)

        def _parse_unique(data: object) -> None | Unique | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                unique_type_0 = Unique.from_dict(data)

                return unique_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unique | Unset, data)

        unique = _parse_unique(d.pop("unique", UNSET))

        job_put = cls(
            target=target,
            backoff_seconds=backoff_seconds,
            callback=callback,
            concurrency=concurrency,
            debounce=debounce,
            expire_after_seconds=expire_after_seconds,
            jitter_seconds=jitter_seconds,
            max_attempts=max_attempts,
            misfire=misfire,
            on_events=on_events,
            overlap=overlap,
            pause_after_failures=pause_after_failures,
            paused=paused,
            payload=payload,
            priority=priority,
            rate_limit=rate_limit,
            schedule=schedule,
            tags=tags,
            timeout_seconds=timeout_seconds,
            timezone=timezone,
            unique=unique,
        )

        return job_put
