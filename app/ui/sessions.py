"""Signing in and out of the dashboard, the session every page depends on, and the CSRF check of
every form that changes something. The session cookie holds a random token (HttpOnly, SameSite=
Strict, Secure over TLS or whenever SCHEDULER_PUBLIC_URL is https, scoped to /ui); the session
itself lives in Postgres (services.ui_sessions)."""

from __future__ import annotations

import hmac
import secrets
from typing import Annotated
from urllib.parse import parse_qs

from fastapi import Depends, Path, Request, Response
from fastapi.responses import RedirectResponse

from app.api.deps import StateDep, authorize, request_id
from app.errors import Forbidden, InvalidInput, Unauthorized
from app.services import ui_sessions
from app.services.audit import AuditContext
from app.services.ui_sessions import SESSION_SECONDS, UiSession
from app.ui.render import SignInRequired, page, ui_router

SESSION_COOKIE = "scheduler_session"
# Before there is a session, the sign-in form is tied to the browser that loaded it by this cookie
# (double submit), so another site cannot sign a visitor in under its own key.
LOGIN_COOKIE = "scheduler_login"
MAX_FORM_FIELDS = 20
MAX_TOKEN_CHARS = 512  # an API key is ~80 characters; the admin token is the operator's choice

router = ui_router()


def _set_cookie(request: Request, response: Response, name: str, value: str, max_age: int) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path="/ui",
        httponly=True,
        secure=_over_tls(request),
        samesite="strict",
    )


def _over_tls(request: Request) -> bool:
    """Whether browsers reach us over TLS: the public URL is https (a TLS proxy's hop to the server
    may be plain HTTP, and its X-Forwarded-Proto believed only from SCHEDULER_FORWARDED_ALLOW_IPS),
    or this request's own scheme is."""
    public_url: str = request.app.state.settings.public_url or ""
    return public_url.startswith("https://") or request.url.scheme == "https"


async def current_session(request: Request, state: StateDep) -> UiSession:
    session = await ui_sessions.get_session(state.pool, request.cookies.get(SESSION_COOKIE, ""))
    if session is None:
        raise SignInRequired
    # The page or form's scope, as the API's routes are refused (app.api.scopes): a session opened
    # with a read-only key sees no action and has every form post refused (403).
    await authorize(request, state, session.principal)
    return session


SessionDep = Annotated[UiSession, Depends(current_session)]


async def read_form(request: Request) -> dict[str, str]:
    """The url-encoded fields of a form post (the body is bounded by api.server.BodyLimit)."""
    try:
        fields = parse_qs(
            (await request.body()).decode(),
            keep_blank_values=True,
            strict_parsing=False,
            max_num_fields=MAX_FORM_FIELDS,
        )
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidInput("the form is not url-encoded UTF-8 within 20 fields", field="body") from exc
    return {name: values[0] for name, values in fields.items()}


def _same(given: str, expected: str) -> bool:
    return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())


async def checked_form(request: Request, session: SessionDep) -> dict[str, str]:
    """The form of a state-changing post, refused (403) unless it carries the session's CSRF token."""
    form = await read_form(request)
    if not _same(form.get("csrf_token", ""), session.csrf_token):
        raise Forbidden("the form's CSRF token is missing or wrong: reload the page", field="csrf_token")
    return form


FormDep = Annotated[dict[str, str], Depends(checked_form)]


async def session_audit(request: Request, session: SessionDep) -> AuditContext:
    """What a dashboard action changes is recorded as the session's doing (services.audit)."""
    return AuditContext(session.actor(), request_id(request))


UiAuditDep = Annotated[AuditContext, Depends(session_audit)]


def _login_page(request: Request, status_code: int = 200, message: str | None = None) -> Response:
    token = secrets.token_urlsafe(32)
    response = page(request, "login.html", status_code, session=None, login_csrf=token, message=message)
    _set_cookie(request, response, LOGIN_COOKIE, token, 3600)
    return response


def _signed_in(request: Request, session_token: str) -> Response:
    # A page, not a redirect: the move to /ui is then a navigation of our own site, so the
    # SameSite=Strict cookie goes with it even when the link was opened from another application.
    response = page(request, "signed_in.html", session=None)
    _set_cookie(request, response, SESSION_COOKIE, session_token, SESSION_SECONDS)
    response.delete_cookie(LOGIN_COOKIE, path="/ui")
    return response


@router.get("/login")
async def login_form(request: Request) -> Response:
    return _login_page(request)


@router.post("/login")
async def login(request: Request, state: StateDep) -> Response:
    form = await read_form(request)
    if not _same(form.get("csrf_token", ""), request.cookies.get(LOGIN_COOKIE, "")):
        raise Forbidden("the sign-in form expired: load it again", field="csrf_token")
    token = form.get("token", "").strip()
    try:
        if len(token) > MAX_TOKEN_CHARS:
            raise Unauthorized("not a valid API key or admin token", field="token")
        session_token = await ui_sessions.sign_in(state.pool, state.keys, token, state.settings.admin_token)
    except Unauthorized:
        return _login_page(request, 401, "That is not a valid API key or admin token.")
    return _signed_in(request, session_token)


@router.get("/login/{link}")
async def login_by_link(
    request: Request, state: StateDep, link: Annotated[str, Path(max_length=64)]
) -> Response:
    """A one-time link (`scheduler dev` prints one): spent on first use."""
    return _signed_in(request, await ui_sessions.redeem_link(state.pool, link))


@router.post("/logout")
async def logout(request: Request, state: StateDep, form: FormDep) -> Response:
    await ui_sessions.sign_out(state.pool, request.cookies.get(SESSION_COOKIE, ""))
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/ui")
    return response
