"""Rendering for every dashboard page: templates (autoescaped), the security headers each answer
carries, and the route class that turns errors into pages instead of problem+json."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates

from app.api.routers import api_router
from app.errors import AppError

HERE = Path(__file__).parent
# Starlette's Jinja2Templates autoescapes every value: a payload holding <script> renders as text.
templates = Jinja2Templates(directory=HERE / "templates")

# No inline script or style anywhere (htmx is told not to add its indicator style or evaluate
# anything: see base.html), no framing, forms post only here.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # a one-time sign-in link never leaves in a Referer
    "Cache-Control": "no-store",  # tenant data is not kept by the browser or a proxy
}


class SignInRequired(Exception):
    """No live session: the page answers with the way to the sign-in form."""


def _when(moment: datetime | str | None, zone: str = "UTC") -> str:
    if moment is None:
        return "—"
    if isinstance(moment, str):  # an attempt's times come from JSON (the run's attempts column)
        moment = datetime.fromisoformat(moment)
    return moment.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S %Z")


def _rate(per_second: float) -> str:
    # A quiet tenant's rate reads better per minute than as 0.00 per second.
    return f"{per_second:,.1f} runs/s" if per_second >= 1 else f"{per_second * 60:,.1f} runs/min"


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


def _as_json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


templates.env.filters.update(when=_when, seconds=_seconds, rate=_rate, as_json=_as_json)
templates.env.globals["now"] = lambda: datetime.now(UTC)


def page(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    return templates.TemplateResponse(request, template, context, status_code=status_code)


def _sign_in_redirect(request: Request) -> Response:
    if request.headers.get("hx-request"):
        # htmx would swap the sign-in page into a fragment; it follows this header with a full load.
        return Response(status_code=204, headers={"HX-Redirect": "/ui/login"})
    return RedirectResponse("/ui/login", status_code=303)


class UiRoute(APIRoute):
    """Every /ui answer carries the security headers; an error is an HTML page with its status."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def render_errors(request: Request) -> Response:
            try:
                response = await handler(request)
            except SignInRequired:
                response = _sign_in_redirect(request)
            except AppError as exc:
                # Named like a problem's `field`, so a person sees which input was at fault.
                message = f"{exc.field}: {exc.message}" if exc.field else exc.message
                response = page(request, "error.html", exc.status_code, message=message, session=None)
            except RequestValidationError as exc:
                fields = ", ".join(str(e["loc"][-1]) for e in exc.errors())
                response = page(request, "error.html", 422, message=f"invalid input: {fields}", session=None)
            response.headers.update(SECURITY_HEADERS)
            return response

        return render_errors


def ui_router() -> APIRouter:
    """A router of dashboard pages or actions: under /ui, with UiRoute's headers and error pages,
    left out of the API's schema."""
    return api_router(prefix="/ui", route_class=UiRoute, include_in_schema=False)
