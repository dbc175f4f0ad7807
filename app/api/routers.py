"""How the HTTP API's routers are made and added to an app."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute


def operation_id(route: APIRoute) -> str:
    """The route's name in camelCase (submit_run -> submitRun): what generated clients call it."""
    first, *rest = route.name.split("_")
    return first + "".join(word.capitalize() for word in rest)


# A JSON body sent without Content-Type (curl's --data-raw, say) is read as JSON; any other declared
# type is refused by BodyLimit with 415 rather than misread as a string.
STRICT_CONTENT_TYPE = False


def api_router(**options: Any) -> APIRouter:
    """A router of the app (the API's or the dashboard's). Its routes get, when they are made, what
    the app would have given them through an include (add_routes): their operation ids and the
    content-type rule."""
    return APIRouter(
        generate_unique_id_function=operation_id, strict_content_type=STRICT_CONTENT_TYPE, **options
    )


def add_routes(app: FastAPI, *routers: APIRouter) -> None:
    """The routers' routes, made once per process at import, added to `app` as they are.

    Not `app.include_router`: FastAPI (0.165) wraps an included router for the app that includes it
    and, on that app's first requests, makes each of its routes again (dependencies, models) for the
    wrapper: 65-145 ms of CPU per app, once per test of the suite, which makes an app per test. So the
    routers are made by `api_router`, with what the include would have applied; none has a prefix,
    dependencies or overrides for an include to add."""
    for router in routers:
        app.router.routes.extend(router.routes)
