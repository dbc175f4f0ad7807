"""create_app(): the composition root of the API process (lifespan, routers, error handlers)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from prometheus_fastapi_instrumentator import Instrumentator

from app.api import flow, health, jobs, run_actions, runs, tenants
from app.api.deps import State
from app.api.problems import install_error_handlers
from app.api.schemas.common import serve_problems_as_problem_json
from app.api.server import BodyLimit
from app.bus.cancels import CancelNotices, cancel_subject
from app.config import Settings, get_settings
from app.engine.engine import Engine
from app.runtime import NotConnected, Runtime
from app.services.admission import AdmissionControl
from app.telemetry.metrics import expose_engine_metrics
from app.telemetry.tracing import NO_NATIVE_TELEMETRY, recording, setup_tracing
from app.ui import mount_dashboard

log = logging.getLogger(__name__)
STARTUP_WAIT_SECONDS = 1.0
DESCRIPTION = "Multi-tenant distributed job scheduler: Postgres is the truth, NATS JetStream carries work."


_instrumentator: Instrumentator | None = None


def operation_id(route: APIRoute) -> str:
    """The route's name in camelCase (submit_run -> submitRun): what generated clients call it."""
    first, *rest = route.name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    setup_tracing("scheduler-api")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not settings.database_url or (settings.engine == "on" and not settings.nats_url):
            raise RuntimeError(
                "SCHEDULER_DATABASE_URL (and SCHEDULER_NATS_URL unless SCHEDULER_ENGINE=off) must be set"
                " (or use `scheduler dev`)"
            )
        # An API without an engine serves from Postgres alone: it connects to NATS (when it has a
        # NATS_URL) only to send cancel notices, so a NATS outage cannot make it unready. The engine
        # this process may run takes its own pool: it LISTENs and holds advisory locks.
        runtime = Runtime(
            settings,
            "scheduler-api",
            nats=bool(settings.nats_url),
            nats_optional=settings.engine != "on",
            min_size=2,
            max_size=20,
            session_state=False,
        )
        notices = CancelNotices(cancel_subject(settings))
        stop = asyncio.Event()
        app.state.ready = asyncio.Event()
        app.state.checks = runtime.checks()
        engine_task: asyncio.Task[None] | None = None

        async def start() -> None:
            try:
                await connect_and_start()
            except Exception:
                log.exception("API start-up failed")
                raise

        async def connect_and_start() -> None:
            nonlocal engine_task
            if not await runtime.connect_postgres(stop):
                return
            assert runtime.pool is not None
            state = State(
                settings,
                runtime.pool,
                AdmissionControl(settings.tenant_max_pending),
                stop_running=notices,
            )
            state.checks = app.state.checks
            app.state.scheduler = state
            app.state.ready.set()  # routes need Postgres alone
            # Everything built so far lives as long as the process: out of the collector's sight,
            # so full collections walk only what requests allocate (they took 20-65 ms each, a
            # single-POST tail, measured with gc callbacks).
            gc.collect()
            gc.freeze()
            if not await runtime.connect_nats(stop):
                return
            notices.nc = runtime.nc
            if settings.engine != "on":
                return
            assert runtime.nc is not None
            engine_pool = await runtime.another_pool(stop, "scheduler-engine", min_size=1, max_size=5)
            if engine_pool is not None:
                engine = Engine(settings, engine_pool, runtime.nc, runtime.hot_index)
                engine_task = asyncio.create_task(engine.run(stop))

        starting = asyncio.create_task(start(), name="start")

        async def started() -> None:
            if starting.done() and not starting.cancelled() and starting.exception() is not None:
                raise RuntimeError("start-up failed")  # the log has why
            if not app.state.ready.is_set():
                raise NotConnected("starting")

        app.state.checks["started"] = started
        if settings.engine == "on":
            expose_engine_metrics()

            async def engine_running() -> None:
                # The engine stops itself when one of its tasks dies, and the API would go on
                # answering ready with nothing dispatching (seen in the fault harness): say so.
                if engine_task is None:
                    raise NotConnected("the engine has not started")
                if engine_task.done():
                    raise RuntimeError("the engine stopped")

            app.state.checks["engine"] = engine_running
        # Reachable dependencies are usually reached at once: wait that long before serving. An
        # unreachable one is retried behind an open port (uvicorn handles no signal before that).
        await asyncio.wait({starting}, timeout=STARTUP_WAIT_SECONDS)
        try:
            yield
        finally:
            stop.set()
            await asyncio.gather(starting, return_exceptions=True)
            if engine_task is not None:
                await asyncio.gather(engine_task, return_exceptions=True)
            await runtime.close()

    app = FastAPI(
        title="Scheduler",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        # FastAPI's own OpenTelemetry layer switches itself on for any SDK tracer provider, ours
        # included when nothing exports: 9 % of a single POST's CPU (py-spy). Server spans come from
        # opentelemetry-instrumentation-fastapi below when recorded, metrics from Prometheus.
        telemetry=NO_NATIVE_TELEMETRY,
        generate_unique_id_function=operation_id,
        # No redirect from "/path/" to "/path": Starlette builds its Location from the Host header,
        # which the caller controls. A wrong path is a 404.
        redirect_slashes=False,
        # A JSON body sent without Content-Type (curl's --data-raw, say) is read as JSON; any other
        # declared type is refused by BodyLimit with 415 rather than misread as a string.
        strict_content_type=False,
    )
    app.state.settings = settings  # what a route needs before the database is reached (app/ui)
    build_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = serve_problems_as_problem_json(build_openapi())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    for router in (tenants.router, jobs.router, flow.router, runs.router, run_actions.router, health.router):
        app.include_router(router)
    mount_dashboard(app)
    install_error_handlers(app)
    # One payload may need up to 4x its stored size in the request (escapes, whitespace).
    single_limit = 4 * settings.max_payload_bytes + 65_536
    app.add_middleware(BodyLimit, limit=settings.max_request_bytes, single_limit=single_limit)

    global _instrumentator
    if _instrumentator is None:  # its metrics live in the process-wide registry: register once
        _instrumentator = Instrumentator(excluded_handlers=["/metrics", "/healthz", "/readyz"])
    _instrumentator.instrument(app).expose(app, endpoint="/metrics", include_in_schema=False)
    if recording():
        # Server spans only when something records them: unrecorded, the middleware still cost a
        # fifth of a single POST's CPU (py-spy), and a run then stores its caller's traceparent.
        FastAPIInstrumentor.instrument_app(app, excluded_urls="/metrics,/healthz,/readyz")
    return app
