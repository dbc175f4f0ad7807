"""The one shape of background work (app/background.py): a periodic service's failed step is
survived, a transient database error as a one-line warning, anything else with its traceback and
counted in scheduler_unexpected_errors_total{service}; the runner stops services stage by stage and
raises what ended a service that died."""

from __future__ import annotations

import asyncio
import logging

import asyncpg
import pytest

from app.background import AGAIN, Periodic, run_services
from app.telemetry import metrics


class Failing(Periodic):
    """Raises from each of its first `failures` steps, then counts steps."""

    interval = 0.01

    def __init__(self, name: str, error: Exception, failures: int = 2):
        self.name = name
        self.error = error
        self.failures = failures
        self.steps = 0

    async def step(self) -> None:
        self.steps += 1
        if self.steps <= self.failures:
            raise self.error


def unexpected(service: str) -> float:
    value: float = metrics.unexpected_errors_total.labels(service)._value.get()
    return value


async def steps_until(service: Failing, stop: asyncio.Event, steps: int) -> None:
    running = asyncio.create_task(service.run(stop))
    async with asyncio.timeout(5):
        while service.steps < steps:
            assert not running.done(), "the service ended"
            await asyncio.sleep(0.005)
    stop.set()
    await asyncio.wait_for(running, 5)


async def test_an_unexpected_error_is_logged_with_its_traceback_counted_and_survived(
    caplog: pytest.LogCaptureFixture,
) -> None:
    service = Failing("test-bug", KeyError("status"))
    before = unexpected("test-bug")
    with caplog.at_level(logging.WARNING, logger="app.background"):
        await steps_until(service, asyncio.Event(), 4)  # two failed steps, then two more
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2 and all(r.exc_info and r.exc_info[0] is KeyError for r in errors)
    assert unexpected("test-bug") == before + 2


async def test_a_transient_database_error_is_a_one_line_warning_not_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    service = Failing("test-transient", asyncpg.exceptions.AdminShutdownError("terminating"), failures=1)
    before = unexpected("test-transient")
    with caplog.at_level(logging.WARNING, logger="app.background"):
        await steps_until(service, asyncio.Event(), 2)
    [record] = caplog.records
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert "AdminShutdownError" in record.getMessage()
    assert unexpected("test-transient") == before


async def test_a_database_error_that_is_not_transient_is_a_bug_and_counted() -> None:
    # A statement Postgres refuses for its text (42xxx) fails the same way every time.
    service = Failing("test-sql", asyncpg.exceptions.UndefinedColumnError("no such column"), failures=1)
    before = unexpected("test-sql")
    await steps_until(service, asyncio.Event(), 2)
    assert unexpected("test-sql") == before + 1


async def test_a_step_that_returns_again_is_followed_at_once_and_a_wake_cuts_the_wait() -> None:
    class Draining(Periodic):
        name = "test-draining"
        interval = 60.0  # never waited out here

        def __init__(self) -> None:
            self.steps = 0
            self.wake = asyncio.Event()

        async def step(self) -> object:
            self.steps += 1
            return AGAIN if self.steps < 3 else None

    service, stop = Draining(), asyncio.Event()
    running = asyncio.create_task(service.run(stop))
    await asyncio.sleep(0.05)
    assert service.steps == 3  # two AGAINs, then the interval's wait
    assert service.wake is not None
    service.wake.set()
    await asyncio.sleep(0.05)
    assert service.steps == 4
    stop.set()
    await asyncio.wait_for(running, 1)  # the wait is cut short by stop too


class Recorder:
    """A service that notes when it has stopped, or dies on its own."""

    def __init__(self, name: str, log: list[str], dies: Exception | None = None):
        self.name, self.log, self.dies = name, log, dies

    async def run(self, stop: asyncio.Event) -> None:
        if self.dies is not None:
            await asyncio.sleep(0.01)
            raise self.dies
        await stop.wait()
        await asyncio.sleep(0.01)  # settling what it has in flight
        self.log.append(self.name)


async def test_stages_stop_in_order_each_after_the_one_before_returned() -> None:
    stopped: list[str] = []
    stop = asyncio.Event()
    stages = [
        [Recorder("intake", stopped)],
        [Recorder("completer", stopped)],
        [Recorder("heartbeat", stopped)],
    ]
    runner = asyncio.create_task(run_services("test", stop, *stages))
    await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(runner, 5)
    assert stopped == ["intake", "completer", "heartbeat"]


async def test_a_service_that_dies_stops_the_rest_and_its_error_is_raised() -> None:
    stopped: list[str] = []
    stop = asyncio.Event()
    stages = [
        [Recorder("calm", stopped), Recorder("dying", stopped, OSError("lost"))],
        [Recorder("last", stopped)],
    ]
    with pytest.raises(OSError, match="lost"):
        await asyncio.wait_for(run_services("test", stop, *stages), 5)
    assert stopped == ["calm", "last"] and not stop.is_set()
