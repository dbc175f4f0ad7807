"""The small HTTP server of the engine and worker processes: /metrics, /healthz, /readyz."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator

import uvicorn
from fastapi import FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from app.telemetry.tracing import NO_NATIVE_TELEMETRY

Check = Callable[[], Awaitable[object]]


async def run_checks(checks: dict[str, Check]) -> tuple[bool, dict[str, str]]:
    results: dict[str, str] = {}
    ok = True
    for name, check in list(checks.items()):  # a starting process adds checks meanwhile
        try:
            await asyncio.wait_for(check(), timeout=2.0)
            results[name] = "ok"
        except Exception as exc:
            ok = False
            results[name] = f"failing: {type(exc).__name__}"
    return ok, results


def ops_app(checks: dict[str, Check]) -> FastAPI:
    # No spans for scrapes and probes: they were 64 of 71 exported spans, every few seconds each.
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None, telemetry=NO_NATIVE_TELEMETRY)

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        # `?name[]=…` (repeatable) renders only the series named, as prometheus_client's own handlers
        # do: a poll of one counter costs the process that series, not the whole exposition's ~2 ms.
        names = request.query_params.getlist("name[]")
        registry = REGISTRY.restricted_registry(names) if names else REGISTRY
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(response: Response) -> dict[str, object]:
        ok, results = await run_checks(checks)
        response.status_code = 200 if ok else 503
        return {"status": "ok" if ok else "unavailable", "checks": results}

    return app


class HostedServer(uvicorn.Server):
    """A uvicorn server inside a process that owns its signals: uvicorn would otherwise take over
    SIGTERM/SIGINT for itself, and the host's graceful shutdown would never start."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve(app: FastAPI, host: str, port: int, stop: asyncio.Event) -> None:
    server = HostedServer(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    await stop.wait()
    server.should_exit = True
    await task
