"""The dashboard at /ui: server-rendered pages (Jinja2) refreshed by htmx, signed in by a
server-side session. It reads and acts only through app.services, as the HTTP API does."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from app.api.routers import add_routes
from app.ui import actions, sessions
from app.ui.pages import admin, audit, failures, groups, jobs, overview, runs
from app.ui.render import HERE


def mount_dashboard(app: FastAPI) -> None:
    """/ui's pages, actions, sign-in, and its static files (our CSS and the vendored htmx)."""
    pages = (
        overview.router,
        runs.router,
        jobs.router,
        failures.router,
        groups.router,
        audit.router,
        admin.router,
    )
    add_routes(app, sessions.router, *pages, actions.router)
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")
