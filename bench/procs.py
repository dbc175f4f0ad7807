"""Real `scheduler api|engine|worker` subprocesses, configured through the environment exactly as a
deployment would be, each with its own /metrics port; always stopped, even when a scenario fails."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import httpx

from app.config import Settings
from app.dev import free_port
from bench.measure import Metrics
from stack.settings import process_env, scheduler_command


class SchedulerProcess:
    def __init__(
        self,
        role: str,
        settings: Settings,
        log_dir: Path,
        name: str | None = None,
        stop_timeout: float = 30.0,
    ):
        self.role = role
        self.stop_timeout = stop_timeout
        self.killed = False
        self.settings = settings
        self.name = name or role
        # The API serves /metrics on its own port; engines and workers on the ops port.
        self.port = settings.port if role == "api" else settings.metrics_port
        self.log_path = log_dir / f"{self.name}-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        args = [*scheduler_command(), self.role]
        if self.role == "api":
            args += ["--host", "127.0.0.1", "--port", str(self.port)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                args, env=process_env(self.settings), stdout=log, stderr=subprocess.STDOUT
            )

    async def wait_ready(self, timeout: float = 90.0) -> None:
        """Until /readyz answers 200 (Postgres and NATS reachable from the process)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"{self.name} exited with {self.proc.returncode}; see {self.log_path}:\n{self.tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{self.base_url}/readyz")).status_code == 200:
                        return
                await asyncio.sleep(0.1)
        raise RuntimeError(
            f"{self.name} not ready within {timeout:.0f}s; see {self.log_path}:\n{self.tail()}"
        )

    async def scrape(self) -> Metrics:
        async with httpx.AsyncClient(timeout=5.0) as client:
            r = await client.get(f"{self.base_url}/metrics")
            r.raise_for_status()
            return Metrics.parse(r.text)

    def signal_stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait_stopped(self) -> None:
        """Wait `stop_timeout` for a graceful exit, then SIGKILL (recorded in `killed`)."""
        if self.proc is None:
            return
        try:
            self.proc.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            self.killed = True
            self.proc.kill()
            self.proc.wait()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


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
