"""every() (app/engine/loop.py): a transient database error is one line; anything else is logged
with its traceback and counted in scheduler_unexpected_errors_total{loop}."""

from __future__ import annotations

import asyncio
import logging

import asyncpg
import pytest

from app.engine.loop import every
from app.telemetry import metrics


def _run_once_raising(exc: Exception, loop_name: str) -> None:
    stop = asyncio.Event()

    async def step() -> None:
        stop.set()  # one step, then every() returns
        raise exc

    asyncio.run(every(stop, 0.01, step, loop_name))


def _unexpected(loop_name: str) -> float:
    value: float = metrics.unexpected_errors_total.labels(loop_name)._value.get()
    return value


def test_a_transient_database_error_is_a_one_line_warning(caplog: pytest.LogCaptureFixture) -> None:
    before = _unexpected("test-transient")
    with caplog.at_level(logging.WARNING, logger="app.engine.loop"):
        _run_once_raising(asyncpg.exceptions.AdminShutdownError("terminating"), "test-transient")
    [record] = caplog.records
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert "AdminShutdownError" in record.getMessage()
    assert _unexpected("test-transient") == before


def test_an_unexpected_error_has_its_traceback_and_is_counted(caplog: pytest.LogCaptureFixture) -> None:
    before = _unexpected("test-bug")
    with caplog.at_level(logging.WARNING, logger="app.engine.loop"):
        _run_once_raising(KeyError("status"), "test-bug")
    [record] = caplog.records
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert record.exc_info[0] is KeyError
    assert _unexpected("test-bug") == before + 1
