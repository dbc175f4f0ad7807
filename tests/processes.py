"""Real `scheduler` subprocesses for end-to-end and fault tests (stack/processes.py), always reaped
at the end."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from app.config import Settings
from app.dev import free_port
from stack.processes import SchedulerProcess

ROOT = Path(__file__).resolve().parent.parent


class Process(SchedulerProcess):
    """Started at once; `env` overrides the settings' variables (SCHEDULER_PORT names an API's port)."""

    def __init__(self, role: str, settings: Settings, log_dir: Path, **env: str):
        port = int(env.pop("SCHEDULER_PORT", 0)) if role == "api" else 0
        super().__init__(role, settings, log_dir, port=port or free_port(), env=env, cwd=ROOT)
        self.start()


@contextlib.asynccontextmanager
async def processes(settings: Settings, log_dir: Path) -> AsyncIterator[Callable[..., Process]]:
    """Yields a factory `spawn(role, **env)`; every process it made is stopped afterwards."""
    made: list[Process] = []

    def spawn(role: str, **env: str) -> Process:
        p = Process(role, settings, log_dir, **env)
        made.append(p)
        return p

    try:
        yield spawn
    finally:
        for p in made:
            p.stop(timeout=10)
