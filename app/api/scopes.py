"""The scope every route needs, in one table: the HTTP API's routes and the dashboard's (/ui).

A route that authenticates its caller (an API key or a dashboard session) and is missing here is
refused to every tenant key (app.api.deps.authorize), and tests/unit/test_route_scopes.py walks the
app's routes and fails on it, so no route ships without a declared scope. ADMIN routes are the admin
token's alone (a tenant key gets 404 from the route); ANY_SESSION needs a session and nothing more.
"""

from __future__ import annotations

from typing import Final

from app.services.auth import Scope

ADMIN: Final = "admin"
ANY_SESSION: Final = "any session"

RUNS_READ: Final[Scope] = "runs:read"
RUNS_WRITE: Final[Scope] = "runs:write"
JOBS_READ: Final[Scope] = "jobs:read"
JOBS_WRITE: Final[Scope] = "jobs:write"
TENANT_ADMIN: Final[Scope] = "tenant:admin"

Needed = Scope | str  # a scope, ADMIN or ANY_SESSION

ROUTE_SCOPES: Final[dict[tuple[str, str], Needed]] = {
    # tenants (the admin token), keys and signing secrets (the tenant's admin scope)
    ("POST", "/tenants"): ADMIN,
    ("GET", "/tenants/{tenant_id}"): ADMIN,
    ("PATCH", "/tenants/{tenant_id}"): ADMIN,
    ("POST", "/tenants/{tenant_id}/pause"): ADMIN,
    ("POST", "/tenants/{tenant_id}/resume"): ADMIN,
    ("POST", "/tenants/{tenant_id}/keys"): TENANT_ADMIN,
    ("GET", "/tenants/{tenant_id}/keys"): TENANT_ADMIN,
    ("DELETE", "/tenants/{tenant_id}/keys/{key_id}"): TENANT_ADMIN,
    ("POST", "/tenants/{tenant_id}/signing-secrets"): TENANT_ADMIN,
    ("GET", "/tenants/{tenant_id}/audit"): TENANT_ADMIN,
    # jobs, and their flow control
    ("GET", "/tenants/{tenant_id}/jobs"): JOBS_READ,
    ("GET", "/tenants/{tenant_id}/jobs/{name}"): JOBS_READ,
    ("PUT", "/tenants/{tenant_id}/jobs/{name}"): JOBS_WRITE,
    ("DELETE", "/tenants/{tenant_id}/jobs/{name}"): JOBS_WRITE,
    ("POST", "/tenants/{tenant_id}/jobs/{name}/pause"): JOBS_WRITE,
    ("POST", "/tenants/{tenant_id}/jobs/{name}/resume"): JOBS_WRITE,
    # runs: a backfill makes runs, so it is a runs:write
    ("GET", "/runs/{run_id}"): RUNS_READ,
    ("GET", "/tenants/{tenant_id}/runs"): RUNS_READ,
    ("POST", "/tenants/{tenant_id}/runs"): RUNS_WRITE,
    ("POST", "/tenants/{tenant_id}/runs/batch"): RUNS_WRITE,
    ("POST", "/tenants/{tenant_id}/runs/actions"): RUNS_WRITE,
    ("POST", "/runs/{run_id}/cancel"): RUNS_WRITE,
    ("POST", "/runs/{run_id}/retry"): RUNS_WRITE,
    ("POST", "/runs/{run_id}/reschedule"): RUNS_WRITE,
    ("POST", "/tenants/{tenant_id}/jobs/{name}/backfill"): RUNS_WRITE,
    # groups are read like runs; an event makes runs
    ("GET", "/tenants/{tenant_id}/groups"): RUNS_READ,
    ("GET", "/tenants/{tenant_id}/groups/{group_id}"): RUNS_READ,
    ("POST", "/tenants/{tenant_id}/events/{name}"): RUNS_WRITE,
    # the dashboard: each page and form as its API counterpart
    ("POST", "/ui/logout"): ANY_SESSION,
    ("GET", "/ui"): RUNS_READ,
    ("GET", "/ui/runs"): RUNS_READ,
    ("GET", "/ui/runs/{run_id}"): RUNS_READ,
    ("GET", "/ui/failures"): RUNS_READ,
    ("GET", "/ui/failures/confirm"): RUNS_WRITE,  # the first step of a bulk action
    ("GET", "/ui/jobs"): JOBS_READ,
    ("GET", "/ui/jobs/{name}"): JOBS_READ,
    ("GET", "/ui/groups"): RUNS_READ,
    ("GET", "/ui/groups/{group_id}"): RUNS_READ,
    ("GET", "/ui/audit"): TENANT_ADMIN,
    ("GET", "/ui/admin"): ADMIN,
    ("POST", "/ui/runs/{run_id}/cancel"): RUNS_WRITE,
    ("POST", "/ui/runs/{run_id}/retry"): RUNS_WRITE,
    ("POST", "/ui/runs/{run_id}/reschedule"): RUNS_WRITE,
    ("POST", "/ui/failures/act"): RUNS_WRITE,
    ("POST", "/ui/jobs/{name}/trigger"): RUNS_WRITE,
    ("POST", "/ui/jobs/{name}"): JOBS_WRITE,
    ("POST", "/ui/jobs/{name}/pause"): JOBS_WRITE,
    ("POST", "/ui/jobs/{name}/resume"): JOBS_WRITE,
    ("POST", "/ui/tenants/{tenant_id}/pause"): ADMIN,
    ("POST", "/ui/tenants/{tenant_id}/resume"): ADMIN,
}


def needed(method: str, path: str) -> Needed | None:
    """What the route (its method and path template) needs; None: nothing is declared for it."""
    return ROUTE_SCOPES.get(("GET" if method == "HEAD" else method, path))
