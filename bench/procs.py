"""Real `scheduler api|engine|worker` subprocesses, configured through the environment exactly as a
deployment would be, each with its own /metrics port; always stopped, even when a scenario fails."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import stack.processes
from app.config import Settings
from app.dev import free_port
from bench.measure import Metrics


class SchedulerProcess(stack.processes.SchedulerProcess):
    """A process of the bench: its port from its settings, and its metrics parsed."""

    def __init__(
        self,
        role: str,
        settings: Settings,
        log_dir: Path,
        name: str | None = None,
        stop_timeout: float = 30.0,
    ):
        port = settings.port if role == "api" else settings.metrics_port
        super().__init__(role, settings, log_dir, port=port, name=name, stop_timeout=stop_timeout)

    async def wait_ready(self, timeout: float = 90.0) -> None:
        await super().wait_ready(timeout)

    async def scrape(self) -> Metrics:
        return Metrics.parse(await self.metrics())


def ops_process(
    role: str, settings: Settings, log_dir: Path, name: str | None = None, stop_timeout: float = 30.0
) -> SchedulerProcess:
    """An engine or worker with an ops port and a lease owner of its own (named after `name`)."""
    name = name or role
    own = settings.model_copy(update={"metrics_port": free_port(), "owner": f"{settings.owner}-{name}"})
    return SchedulerProcess(role, own, log_dir, name=name, stop_timeout=stop_timeout)


@contextlib.asynccontextmanager
async def running(processes: Sequence[SchedulerProcess]) -> AsyncIterator[Sequence[SchedulerProcess]]:
    """Start them all at once, wait until every one is ready, and stop them all afterwards."""
    try:
        for p in processes:
            p.start()
        await asyncio.gather(*(p.wait_ready() for p in processes))
        yield processes
    finally:
        for p in processes:
            p.signal_stop()

        def wait_all() -> None:
            for p in processes:
                p.wait_stopped()

        await asyncio.to_thread(wait_all)


async def scrape_all(processes: Sequence[SchedulerProcess]) -> list[Metrics]:
    return list(await asyncio.gather(*(p.scrape() for p in processes)))
