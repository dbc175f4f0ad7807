"""Request-scoped dependencies: the app's state, the caller's principal, and the audit context of
what the request changes."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass, field
from typing import Annotated

import asyncpg
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.api.scopes import ADMIN, ANY_SESSION, needed
from app.config import Settings
from app.domain import StopRunning, no_stop_notice
from app.errors import Forbidden, Unavailable
from app.services import runs as run_service
from app.services.admission import AdmissionControl
from app.services.audit import Actor, AuditContext, new_request_id
from app.services.auth import KeyCache, Principal, authenticate
from app.services.events import Publisher
from app.services.submission import Submitter
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
    submitter: Submitter = field(init=False)  # what the API's routes and the dashboard submit runs with
    events: Publisher = field(init=False)  # what the API publishes tenants' events with

    def __post_init__(self) -> None:
        self.submitter = Submitter(self.settings, self.pool, self.admission, self.wakeups)
        self.events = Publisher(self.settings, self.pool, self.admission, self.wakeups)


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
    request: Request,
    state: Annotated[State, Depends(get_state)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    principal = await authenticate(
        state.pool,
        state.keys,
        credentials.credentials if credentials is not None else None,
        state.settings.admin_token,
    )
    await authorize(request, state, principal)
    return principal


async def authorize(request: Request, state: State, principal: Principal) -> None:
    """Refuses a tenant's key (or dashboard session) the route's scope does not cover (app.api.scopes),
    before the route reads its body or writes anything: 403 naming the scope. The resource is
    checked first, so another tenant's stays 404 whatever the key's scopes: the path's tenant, or the
    run a run id names (looked up only on the way to a refusal). A route with no scope declared is
    refused to every tenant key."""
    if principal.is_admin:
        return
    route = request.scope.get("route")
    scope = needed(request.method, getattr(route, "path", ""))
    if scope is None:
        raise Forbidden("this route declares no scope: only the admin token may use it")
    if scope in (ADMIN, ANY_SESSION):
        return  # an ADMIN route refuses a tenant key itself, with 404 (Principal.require_admin)
    tenant_id = request.path_params.get("tenant_id")
    if tenant_id is not None:
        principal.require_tenant(tenant_id)
    if principal.can(scope):
        return
    run_id = request.path_params.get("run_id")
    if run_id is not None:
        with contextlib.suppress(ValueError):  # not an id: no run to tell apart, the refusal stands
            await run_service.get_run(state.pool, uuid.UUID(run_id), principal.tenant_id)
    principal.require_scope(scope)


StateDep = Annotated[State, Depends(get_state)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]


def request_id(request: Request) -> str:
    """The request's id (app.api.server.RequestId); one of its own where that is not installed."""
    given: str | None = request.scope.get("scheduler.request_id")
    return given or new_request_id()


async def get_audit(request: Request, principal: PrincipalDep) -> AuditContext:
    """Who a change is recorded as: the admin token, or the tenant key by its id (never its secret)."""
    if principal.is_admin:
        actor = Actor("admin", "admin")
    else:
        assert principal.key_id is not None  # a tenant is authenticated by one of its keys
        actor = Actor("key", principal.key_id)
    return AuditContext(actor, request_id(request))


AuditDep = Annotated[AuditContext, Depends(get_audit)]
