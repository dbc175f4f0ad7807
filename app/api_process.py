"""The API process's lifetime: what it connects to, what its readiness checks ask, how it stops.

`ApiProcess.lifespan` is the FastAPI lifespan app.main's builder installs. The process opens its
port before its dependencies answer (app.runtime retries them behind it): routes need Postgres
alone, so the app is ready once Postgres is reached; NATS carries cancel notices and, when this
process runs an engine (SCHEDULER_ENGINE=on), the engine's work.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI

from app.api.deps import State
from app.bus.cancels import CancelNotices, cancel_subject
from app.config import Settings
from app.engine.engine import Engine
from app.runtime import NotConnected, Runtime
from app.services.admission import AdmissionControl
from app.telemetry.metrics import expose_engine_metrics

log = logging.getLogger(__name__)
STARTUP_WAIT_SECONDS = 1.0


class ApiProcess:
    """Start (connect, build the routes' state, maybe run an engine), readiness checks, close."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.stop = asyncio.Event()
        self.ready = asyncio.Event()
        self.notices = CancelNotices(cancel_subject(settings))
        self.engine_task: asyncio.Task[None] | None = None
        self.starting: asyncio.Task[None] | None = None

    def _runtime(self) -> Runtime:
        settings = self.settings
        if not settings.database_url or (settings.engine == "on" and not settings.nats_url):
            raise RuntimeError(
                "SCHEDULER_DATABASE_URL (and SCHEDULER_NATS_URL unless SCHEDULER_ENGINE=off) must be set"
                " (or use `scheduler dev`)"
            )
        # An API without an engine connects to NATS (when it has a NATS_URL) only to send cancel
        # notices, so a NATS outage cannot make it unready. An engine in this process takes a pool
        # of its own: it LISTENs and holds advisory locks.
        return Runtime(
            settings,
            "scheduler-api",
            nats=bool(settings.nats_url),
            nats_optional=settings.engine != "on",
            min_size=2,
            max_size=20,
            session_state=False,
        )

    @contextlib.asynccontextmanager
    async def lifespan(self, app: FastAPI) -> AsyncIterator[None]:
        self.runtime = self._runtime()
        self.checks = self.runtime.checks()
        self.checks["started"] = self._started
        if self.settings.engine == "on":
            self.checks["engine"] = self._engine_running
        app.state.ready = self.ready
        app.state.checks = self.checks
        if self.settings.engine == "on":
            expose_engine_metrics()
        self.starting = asyncio.create_task(self._start(app), name="start")
        # Reachable dependencies are usually reached at once: wait that long before serving. An
        # unreachable one is retried behind an open port (uvicorn handles no signal before that).
        await asyncio.wait({self.starting}, timeout=STARTUP_WAIT_SECONDS)
        try:
            yield
        finally:
            await self.close()

    async def _start(self, app: FastAPI) -> None:
        try:
            await self._connect_and_start(app)
        except Exception:
            log.exception("API start-up failed")
            raise

    async def _connect_and_start(self, app: FastAPI) -> None:
        runtime, settings = self.runtime, self.settings
        if not await runtime.connect_postgres(self.stop):
            return
        assert runtime.pool is not None
        state = State(
            settings,
            runtime.pool,
            AdmissionControl(settings.tenant_max_pending),
            stop_running=self.notices,
        )
        app.state.scheduler = state
        self.ready.set()  # routes need Postgres alone
        # Everything built so far lives as long as the process: out of the collector's sight, so a
        # full collection walks only what requests allocate (a single POST's tail otherwise).
        gc.collect()
        gc.freeze()
        if not await runtime.connect_nats(self.stop):
            return
        self.notices.nc = runtime.nc
        if settings.engine != "on":
            return
        assert runtime.nc is not None
        engine_pool = await runtime.another_pool(self.stop, "scheduler-engine", min_size=1, max_size=5)
        if engine_pool is not None:
            engine = Engine(settings, engine_pool, runtime.nc, runtime.hot_index)
            self.engine_task = asyncio.create_task(engine.run(self.stop))

    async def _started(self) -> None:
        starting = self.starting
        if starting is not None and starting.done() and not starting.cancelled() and starting.exception():
            raise RuntimeError("start-up failed")  # the log has why
        if not self.ready.is_set():
            raise NotConnected("starting")

    async def _engine_running(self) -> None:
        # The engine stops itself when one of its tasks dies; the API must not go on answering
        # ready with nothing dispatching.
        if self.engine_task is None:
            raise NotConnected("the engine has not started")
        if self.engine_task.done():
            raise RuntimeError("the engine stopped")

    async def close(self) -> None:
        self.stop.set()
        tasks = [t for t in (self.starting, self.engine_task) if t is not None]
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.runtime.close()
