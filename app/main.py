"""create_app(): the API app — routers, middleware, error handlers, the OpenAPI document — with the
process's lifetime (app.api_process) as its lifespan."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from prometheus_fastapi_instrumentator import Instrumentator

from app.api import audit, events, flow, groups, health, jobs, run_actions, runs, tenants
from app.api.problems import install_error_handlers
from app.api.routers import STRICT_CONTENT_TYPE, add_routes, operation_id
from app.api.schemas.common import serve_problems_as_problem_json
from app.api.server import BodyLimit, RequestId
from app.api_process import ApiProcess
from app.config import Settings, get_settings
from app.telemetry.tracing import NO_NATIVE_TELEMETRY, recording, setup_tracing
from app.ui import mount_dashboard

log = logging.getLogger(__name__)
DESCRIPTION = "Multi-tenant distributed job scheduler: Postgres is the truth, NATS JetStream carries work."


_instrumentator: Instrumentator | None = None


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    setup_tracing("scheduler-api")

    process = ApiProcess(settings)
    app = FastAPI(
        title="Scheduler",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=process.lifespan,
        # FastAPI's own OpenTelemetry layer switches itself on for any SDK tracer provider, ours
        # included when nothing exports: 9 % of a single POST's CPU (py-spy). Server spans come from
        # opentelemetry-instrumentation-fastapi below when recorded, metrics from Prometheus.
        telemetry=NO_NATIVE_TELEMETRY,
        generate_unique_id_function=operation_id,
        # No redirect from "/path/" to "/path": Starlette builds its Location from the Host header,
        # which the caller controls. A wrong path is a 404.
        redirect_slashes=False,
        strict_content_type=STRICT_CONTENT_TYPE,  # as on every router's routes
    )
    app.state.settings = settings  # what a route needs before the database is reached (app/ui)
    build_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = serve_problems_as_problem_json(build_openapi())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    add_routes(
        app,
        tenants.router,
        jobs.router,
        flow.router,
        runs.router,
        run_actions.router,
        groups.router,
        events.router,
        audit.router,
        health.router,
    )
    mount_dashboard(app)
    install_error_handlers(app)
    # One payload may need up to 4x its stored size in the request (escapes, whitespace).
    single_limit = 4 * settings.max_payload_bytes + 65_536
    app.add_middleware(BodyLimit, limit=settings.max_request_bytes, single_limit=single_limit)
    app.add_middleware(RequestId)  # outermost: a refused body's answer carries its id too

    global _instrumentator
    if _instrumentator is None:  # its metrics live in the process-wide registry: register once
        _instrumentator = Instrumentator(excluded_handlers=["/metrics", "/healthz", "/readyz"])
    _instrumentator.instrument(app).expose(app, endpoint="/metrics", include_in_schema=False)
    if recording():
        # Server spans only when something records them: unrecorded, the middleware still cost a
        # fifth of a single POST's CPU (py-spy), and a run then stores its caller's traceparent.
        FastAPIInstrumentor.instrument_app(app, excluded_urls="/metrics,/healthz,/readyz")
    return app
