"""Request-scoped dependencies: the app's state and the caller's principal."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Annotated

import asyncpg
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.config import Settings
from app.domain import StopRunning, no_stop_notice
from app.errors import Unavailable
from app.services.admission import AdmissionControl
from app.services.auth import KeyCache, Principal, authenticate
from app.services.wakeups import WakeUps


@dataclass
class State:
    """Everything the API's routes use, built once by the lifespan."""

    settings: Settings
    pool: asyncpg.Pool
    admission: AdmissionControl
    # Tells the workers to stop runs a cancel took out of running (app.bus.cancels.CancelNotices).
    stop_running: StopRunning = no_stop_notice
    keys: KeyCache = field(default_factory=KeyCache)
    wakeups: WakeUps = field(default_factory=WakeUps)
    checks: dict[str, object] = field(default_factory=dict)  # readiness probes by name


# A request that reaches a process still connecting (app.runtime) waits this long, then gets a 503.
STARTING_WAIT_SECONDS = 5.0


async def get_state(request: Request) -> State:  # async: a sync dependency runs in a thread pool
    ready: asyncio.Event = request.app.state.ready
    if not ready.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ready.wait(), STARTING_WAIT_SECONDS)
        if not ready.is_set():
            raise Unavailable("starting: the database is not reachable yet", headers={"Retry-After": "5"})
    state: State = request.app.state.scheduler
    return state


# Declares the bearer scheme in the OpenAPI contract and reads the header; a missing or non-bearer
# header is None here, so the refusal stays authenticate's 401 problem, not FastAPI's own.
bearer = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    bearerFormat="sch_<key id>_<secret>",
    description="A tenant's API key, or the admin token.",
)


async def get_principal(
    state: Annotated[State, Depends(get_state)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    return await authenticate(
        state.pool,
        state.keys,
        credentials.credentials if credentials is not None else None,
        state.settings.admin_token,
    )


StateDep = Annotated[State, Depends(get_state)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
