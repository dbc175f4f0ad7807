"""create_app(): the composition root of the API process (lifespan, routers, error handlers)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from prometheus_fastapi_instrumentator import Instrumentator
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api import health, jobs, runs, tenants
from app.api.deps import State
from app.bus.hot_index import HotIndex
from app.bus.jetstream import close as close_nats
from app.bus.jetstream import connect
from app.config import Settings, get_settings
from app.db.connection import create_pool
from app.engine.supervisor import Engine
from app.errors import AppError, PayloadTooLarge
from app.services.submission import AdmissionControl
from app.telemetry.tracing import recording, setup_tracing

log = logging.getLogger(__name__)
DESCRIPTION = "Multi-tenant distributed job scheduler: Postgres is the truth, NATS JetStream carries work."


def _field(loc: tuple[Any, ...]) -> str:
    """('body', 'runs', 3, 'scheduled_at') -> 'runs[3].scheduled_at'."""
    out = ""
    for part in loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or (str(loc[0]) if loc else "body")


def _error(
    status: int, error: str, message: str, field: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    body: dict[str, Any] = {"error": error, "message": message}
    if field is not None:
        body["field"] = field
    return JSONResponse(body, status_code=status, headers=headers)


async def _app_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, AppError)
    return JSONResponse(exc.body(), status_code=exc.status_code, headers=exc.headers)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0]
    field = _field(tuple(first.get("loc", ())))
    if first.get("type") == "json_invalid":
        return _error(422, "InvalidInput", "request body is not valid JSON", "body")
    return _error(422, "InvalidInput", f"{field}: {first.get('msg', 'invalid')}", field)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    # FastAPI answers any failure to read a body other than a JSON syntax error with a bare 400
    # "There was an error parsing the body", chained to the real cause: answer the cause instead.
    if isinstance(exc.__cause__, AppError):  # BodyLimit refused a streamed (chunked) body mid-read
        return await _app_error(request, exc.__cause__)
    if isinstance(exc.__cause__, UnicodeDecodeError):
        return _error(422, "InvalidInput", "request body is not valid UTF-8", "body")
    names = {404: "NotFound", 405: "MethodNotAllowed", 401: "Unauthorized"}
    headers = dict(exc.headers) if exc.headers else None
    return _error(exc.status_code, names.get(exc.status_code, "HTTPError"), str(exc.detail), headers=headers)


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    # Never leak internals (or secrets inside them) to the caller; the log has the details.
    log.exception("unhandled error", exc_info=exc)
    return _error(500, "InternalError", "internal error")


class BodyLimit:
    """Refuses request bodies over the limit, declared or streamed, before a route reads them.

    A batch may carry `limit` bytes; any other body far less (`single_limit`: a run or a job is one
    payload plus a few fields), so a flood of oversized single POSTs is refused from its
    Content-Length instead of being read and parsed. A body declared as something other than JSON
    is refused with 415 naming the header; a body with no Content-Type is read as JSON."""

    def __init__(self, app: ASGIApp, limit: int, single_limit: int):
        self.app = app
        self.limit = limit
        self.single_limit = min(single_limit, limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit if scope["path"].endswith("/batch") else self.single_limit
        declared: int | None = None
        content_type = b""
        chunked = False
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit():
                declared = int(value)
            elif name == b"content-type":
                content_type = value
            elif name == b"transfer-encoding":
                chunked = True
        if declared is not None and declared > limit:
            await _error(413, "PayloadTooLarge", f"request body over {limit} bytes", "body")(
                scope, receive, send
            )
            return
        # Only a body is judged by its type: a GET that sends a Content-Type has none to misread.
        if (declared or chunked) and content_type and not _is_json(content_type):
            message = "the body must be JSON: send Content-Type: application/json, or no Content-Type"
            await _error(415, "UnsupportedMediaType", message, "content-type")(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise PayloadTooLarge(f"request body over {limit} bytes", field="body")
            return message

        await self.app(scope, limited, send)


def _is_json(content_type: bytes) -> bool:
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (media.startswith(b"application/") and media.endswith(b"+json"))


_instrumentator: Instrumentator | None = None


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    setup_tracing("scheduler-api")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not settings.database_url or not settings.nats_url:
            raise RuntimeError(
                "SCHEDULER_DATABASE_URL and SCHEDULER_NATS_URL must be set (or use `scheduler dev`)"
            )
        # The engine this process may run takes its own pool: it LISTENs and holds advisory locks.
        pool = await create_pool(
            settings.database_url, min_size=2, max_size=20, name="scheduler-api", session_state=False
        )
        nc = await connect(settings.nats_url, "scheduler-api")
        hot_index = (
            HotIndex(settings.redis_url, f"{settings.stream}:due")
            if (settings.hot_index == "redis" and settings.redis_url)
            else None
        )

        async def postgres() -> None:
            async with pool.acquire() as conn:
                await conn.fetchval("SELECT 1")

        async def nats() -> None:
            if not nc.is_connected:
                raise ConnectionError("nats disconnected")
            await nc.flush(timeout=1)

        state = State(settings, pool, AdmissionControl(settings.tenant_max_pending), hot_index)
        state.checks = {"postgres": postgres, "nats": nats}
        app.state.scheduler = state
        stop = asyncio.Event()
        engine_task = None
        engine_pool = None
        if settings.engine == "on":
            engine_pool = await create_pool(
                settings.database_url, min_size=1, max_size=5, name="scheduler-engine"
            )
            engine = Engine(settings, engine_pool, nc, hot_index)
            engine_task = asyncio.create_task(engine.run(stop), name="engine")

            async def engine_running() -> None:
                # The engine stops itself when one of its tasks dies, and the API would go on
                # answering ready with nothing dispatching (seen in the fault harness): say so.
                if engine_task.done():
                    raise RuntimeError("the engine stopped")

            state.checks["engine"] = engine_running
        # Everything built so far lives as long as the process: out of the collector's sight, so
        # full collections walk only what requests allocate (they took 20-65 ms each, a
        # single-POST tail, measured with gc callbacks).
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            stop.set()
            if engine_task is not None:
                await asyncio.gather(engine_task, return_exceptions=True)
            if hot_index is not None:
                await hot_index.close()
            await close_nats(nc)
            await pool.close()
            if engine_pool is not None:
                await engine_pool.close()

    app = FastAPI(
        title="Scheduler",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        # FastAPI's own OpenTelemetry layer switches itself on for any SDK tracer provider, ours
        # included when nothing exports: 9 % of a single POST's CPU (py-spy). Server spans come from
        # opentelemetry-instrumentation-fastapi below when recorded, metrics from Prometheus.
        telemetry={"tracing": False, "metrics": False, "logs": False},
        # No redirect from "/path/" to "/path": Starlette builds its Location from the Host header,
        # which the caller controls. A wrong path is a 404.
        redirect_slashes=False,
        # A JSON body sent without Content-Type (curl's --data-raw, say) is read as JSON; any other
        # declared type is refused by BodyLimit with 415 rather than misread as a string.
        strict_content_type=False,
    )
    for router in (tenants.router, jobs.router, runs.router, health.router):
        app.include_router(router)
    app.add_exception_handler(AppError, _app_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
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
