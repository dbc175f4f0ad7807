"""Every route that authenticates its caller declares its scope in app.api.scopes.ROUTE_SCOPES.

The routes come from the app itself: a route added without a scope (the audit log's, a group's, an
event's...) fails here, before it could ship to tenant keys unscoped (at run time it is refused to
every tenant key, app.api.deps.authorize)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts

from app.api.deps import get_principal
from app.api.scopes import ADMIN, ANY_SESSION, ROUTE_SCOPES, needed
from app.config import Settings
from app.main import create_app
from app.services.auth import SCOPES
from app.ui.sessions import current_session

APP = create_app(Settings())
AUTHENTICATES = {get_principal, current_session}


def _calls(dependant: Dependant) -> Iterator[Callable[..., Any]]:
    for sub in dependant.dependencies:
        if sub.call is not None:
            yield sub.call
        yield from _calls(sub)


def _routes() -> Iterator[tuple[str, APIRoute]]:
    """(method, route) of every FastAPI route; the route as the request's scope names it at run time."""
    for context in iter_route_contexts(APP.routes):
        route = context.original_route
        if isinstance(route, APIRoute):
            for method in route.methods:
                yield method, route


AUTHENTICATED = sorted(
    (method, route.path) for method, route in _routes() if AUTHENTICATES & set(_calls(route.dependant))
)


def test_every_authenticated_route_declares_its_scope() -> None:
    missing = [(m, p) for m, p in AUTHENTICATED if needed(m, p) is None]
    assert not missing, f"declare these routes' scopes in app/api/scopes.py ROUTE_SCOPES: {missing}"


def test_the_table_names_only_routes_that_exist_and_scopes_that_exist() -> None:
    assert set(ROUTE_SCOPES) == set(AUTHENTICATED), "a stale entry in ROUTE_SCOPES"
    assert set(ROUTE_SCOPES.values()) <= {*SCOPES, ADMIN, ANY_SESSION}


def test_a_route_naming_a_tenant_or_run_authenticates() -> None:
    """A route with a tenant's or a run's id in its path reads or changes tenant data: it must go
    through get_principal (or a dashboard session), where scopes are checked."""
    open_routes = [
        (method, route.path)
        for method, route in _routes()
        if ("{tenant_id}" in route.path or "{run_id}" in route.path)
        and (method, route.path) not in AUTHENTICATED
    ]
    assert not open_routes


def test_every_scoped_api_route_documents_its_403() -> None:
    schema = APP.openapi()
    for method, path in AUTHENTICATED:
        if path.startswith("/ui") or ROUTE_SCOPES[(method, path)] in (ADMIN, ANY_SESSION):
            continue
        assert "403" in schema["paths"][path][method.lower()]["responses"], (method, path)
