"""Real `scheduler api|engine|worker` subprocesses, configured through the environment exactly as a
deployment would be, each with its own port (the API's HTTP port, or the ops port of an engine or
worker) and its output in a log file."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import httpx

from app.config import Settings
from stack.eventually import eventually
from stack.settings import process_env, scheduler_command

# How long a process may take to start: a precondition of the tests and the bench, not a figure they
# measure. Its imports alone take a few CPU seconds, which on two cores shared by the suite's parallel
# workers (or a loaded machine) stretch many times over.
READY_TIMEOUT = 120.0


class SchedulerProcess:
    def __init__(
        self,
        role: str,
        settings: Settings,
        log_dir: Path,
        *,
        port: int,
        name: str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        stop_timeout: float = 30.0,
    ):
        self.role = role
        self.settings = settings
        self.name = name or role
        # The API serves /metrics and /readyz on its own HTTP port; engines and workers on the ops port.
        self.port = port
        self.env = env or {}
        self.cwd = cwd
        self.stop_timeout = stop_timeout
        self.killed = False  # did not stop within stop_timeout of SIGTERM
        self.log_path = log_dir / f"{self.name}-{port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = process_env(self.settings)
        env.update(self.env)
        args = [*scheduler_command(), self.role]
        if self.role == "api":
            args += ["--host", "127.0.0.1", "--port", str(self.port)]
        else:
            env["SCHEDULER_METRICS_PORT"] = str(self.port)
        with open(self.log_path, "ab") as log:  # the child holds its own descriptor
            self.proc = subprocess.Popen(args, cwd=self.cwd, env=env, stdout=log, stderr=subprocess.STDOUT)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    async def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Until /readyz answers 200; RuntimeError (with the log's end) if it exits or takes longer."""
        assert self.proc is not None
        proc = self.proc
        async with httpx.AsyncClient(timeout=2.0) as client:

            async def ready() -> bool:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{self.name} exited {proc.returncode}; {self.log_path}:\n{self.output()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    return (await client.get(f"{self.base_url}/readyz")).status_code == 200
                return False

            try:
                await eventually(ready, until=bool, timeout=timeout, interval=0.1)
            except TimeoutError:
                raise RuntimeError(
                    f"{self.name} not ready within {timeout:g}s; {self.log_path}:\n{self.output()}"
                ) from None

    async def metrics(self) -> str:
        async with httpx.AsyncClient(timeout=5.0) as client:
            r = await client.get(f"{self.base_url}/metrics")
            r.raise_for_status()
            return r.text

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def signal_stop(self) -> None:
        # A SIGSTOPped process cannot handle SIGTERM: let it run first.
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)

    def wait_stopped(self, timeout: float | None = None) -> int | None:
        """Wait for a graceful exit, then SIGKILL (recorded in `killed`); the exit code."""
        if self.proc is None:
            return None
        try:
            self.proc.wait(self.stop_timeout if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            self.killed = True
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode

    def stop(self, timeout: float | None = None) -> int | None:
        self.signal_stop()
        return self.wait_stopped(timeout)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(10)

    def output(self, chars: int = 4000) -> str:
        """The end of the process's log."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""
