"""How `wait` polls a run, for both clients: often at first (most runs are short), then every
couple of seconds, until the run ends or the time is up."""

from __future__ import annotations

import time
import uuid

from scheduler_client.generated.models import Run

FIRST_POLL = 0.1
MAX_POLL = 2.0


class Waiting:
    def __init__(self, run_id: uuid.UUID | str, timeout: float):
        self.run_id = run_id
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.poll = FIRST_POLL

    def pause(self, run: Run) -> float:
        """Seconds to sleep before reading the run again; TimeoutError when the time is up."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"run {self.run_id} is still {run.status} after {self.timeout:g}s")
        pause, self.poll = min(self.poll, left), min(self.poll * 2, MAX_POLL)
        return pause
