"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.deps import StateDep
from app.api.schemas import Health
from app.telemetry.ops_server import run_checks

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Liveness: the process answers."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}})
async def readyz(state: StateDep, response: Response) -> Health:
    """Readiness: Postgres and NATS answer."""
    ok, results = await run_checks(state.checks)  # type: ignore[arg-type]
    response.status_code = 200 if ok else 503
    return Health(status="ok" if ok else "unavailable", checks=results)
