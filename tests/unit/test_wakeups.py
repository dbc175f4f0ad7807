"""WakeUps: one NOTIFY per process per interval, and always for a run scheduled in the past."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from app.services.wakeups import WakeUps


def _request(scheduled_at: datetime | None = None) -> datetime | None:
    """A submitted run as WakeUps sees it: its scheduled_at (None: now)."""
    return scheduled_at


def test_one_wake_up_per_interval() -> None:
    wakeups = WakeUps(interval=0.2)
    assert wakeups.due([_request()])
    assert not wakeups.due([_request()])
    assert not wakeups.due([_request(datetime.now(UTC) + timedelta(hours=1))])
    time.sleep(0.21)
    assert wakeups.due([_request()])


def test_a_backdated_run_always_wakes_the_engines() -> None:
    wakeups = WakeUps(interval=3600)
    assert wakeups.due([_request()])
    past = datetime.now(UTC) - timedelta(minutes=5)
    assert wakeups.due([_request(), _request(past)])  # it lowers the engines' claim floor
    assert not wakeups.due([_request(datetime.now(UTC))])  # now is not the past (a second's slack)
