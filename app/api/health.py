"""Liveness and readiness."""

from __future__ import annotations

from fastapi import Request, Response

from app.api.routers import api_router
from app.api.schemas.common import Health
from app.telemetry.ops_server import run_checks

router = api_router(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Liveness: the process answers."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}})
async def readyz(request: Request, response: Response) -> Health:
    """Readiness: Postgres answers (NATS and the engine too where this process runs one)."""
    ok, results = await run_checks(request.app.state.checks)
    response.status_code = 200 if ok else 503
    return Health(status="ok" if ok else "unavailable", checks=results)
