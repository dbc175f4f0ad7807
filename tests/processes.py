"""Real `scheduler` subprocesses for end-to-end and fault tests, always reaped at the end."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx

from app.config import Settings
from app.dev import free_port
from stack.settings import process_env

ROOT = Path(__file__).resolve().parent.parent


class Process:
    def __init__(self, role: str, settings: Settings, log_dir: Path, **env: str):
        self.role = role
        self.port = free_port()
        environment = process_env(settings)
        environment.update({"SCHEDULER_METRICS_PORT": str(self.port), **env})
        if role == "api":  # the API serves /metrics and /readyz on its own HTTP port
            self.port = int(env.get("SCHEDULER_PORT", self.port))
            environment["SCHEDULER_PORT"] = str(self.port)
        self.log_path = log_dir / f"{role}-{self.port}.log"
        self.log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", role],
            cwd=ROOT,
            env=environment,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    async def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        async with httpx.AsyncClient(timeout=1) as client:
            while asyncio.get_running_loop().time() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.role} exited {self.proc.returncode}:\n{self.output()}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"http://127.0.0.1:{self.port}/readyz")).status_code == 200:
                        return
                await asyncio.sleep(0.1)
        raise RuntimeError(f"{self.role} not ready in {timeout}s:\n{self.output()}")

    async def metrics(self) -> str:
        async with httpx.AsyncClient(timeout=5) as client:
            return (await client.get(f"http://127.0.0.1:{self.port}/metrics")).text

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]


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
            if p.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.proc.pid, signal.SIGCONT)  # a SIGSTOPped process cannot handle SIGTERM
            p.stop(timeout=10)
