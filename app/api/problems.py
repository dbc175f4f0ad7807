"""Every error the API answers, rendered as RFC 9457 problem details by one set of handlers."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.api.schemas.common import TARGET_TYPES
from app.errors import PROBLEM_JSON, AppError, InvalidInput, Unavailable, problem
from app.services.availability import DATABASE_ERRORS, RETRY_AFTER_SECONDS, database_away

log = logging.getLogger(__name__)


def _field(loc: tuple[Any, ...]) -> str:
    """('body', 'runs', 3, 'scheduled_at') -> 'runs[3].scheduled_at'."""
    out = ""
    for part in loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or (str(loc[0]) if loc else "body")


def problem_response(
    status: int, code: str, detail: str, field: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        problem(status, code, detail, field), status_code=status, headers=headers, media_type=PROBLEM_JSON
    )


async def _app_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, AppError)
    return problem_response(exc.status_code, exc.code, exc.message, exc.field, exc.headers)


def _drop_union_tags(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """A discriminated union reports ('target', 'http', 'url'): keep the field, drop the tag. A
    header's name is the tenant's data, not a field of ours: stop at `headers`."""
    out: list[Any] = []
    for part in loc:
        if out and out[-1] == "target" and part in TARGET_TYPES:
            continue
        out.append(part)
        if part == "headers" and "target" in out:
            break
    return tuple(out)


def _header_named(loc: tuple[Any, ...]) -> Any:
    """The header whose value a `target.headers` error is about: named in the detail, not in
    `field`. A name that is itself at fault is not echoed (it may be anything)."""
    if "target" not in loc or "headers" not in loc[loc.index("target") :] or loc[-1] == "[key]":
        return None
    after = loc.index("headers", loc.index("target")) + 1
    return loc[after] if after < len(loc) else None


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0]
    loc = tuple(first.get("loc", ()))
    field = _field(_drop_union_tags(loc))
    if first.get("type") == "json_invalid":
        return problem_response(422, InvalidInput.code, "request body is not valid JSON", "body")
    header = _header_named(loc)
    where = field if header is None else f"{field}[{header!r}]"
    return problem_response(422, InvalidInput.code, f"{where}: {first.get('msg', 'invalid')}", field)


# Starlette's own errors (unknown route, wrong method, ...) by status; anything else is `http_error`.
_HTTP_CODES = {400: "bad_request", 401: "unauthorized", 404: "not_found", 405: "method_not_allowed"}


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    # FastAPI answers any failure to read a body other than a JSON syntax error with a bare 400
    # "There was an error parsing the body", chained to the real cause: answer the cause instead.
    if isinstance(exc.__cause__, AppError):  # BodyLimit refused a streamed (chunked) body mid-read
        return await _app_error(request, exc.__cause__)
    if isinstance(exc.__cause__, UnicodeDecodeError):
        return problem_response(422, InvalidInput.code, "request body is not valid UTF-8", "body")
    headers = dict(exc.headers) if exc.headers else None
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    return problem_response(exc.status_code, code, str(exc.detail), headers=headers)


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    # Never leak internals (or secrets inside them) to the caller; the log has the details.
    log.exception("unhandled error", exc_info=exc)
    return problem_response(500, "internal_error", "internal error")


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    """The database away (a restart, a failover with no primary yet) is the service unavailable for
    a moment: 503 with Retry-After, which a client retries (with its Idempotency-Key, a submission
    whose answer was lost is answered with the run it made). Anything else is a bug: 500."""
    if not database_away(exc):
        return await _unexpected(request, exc)
    log.warning("database unavailable: %s: %s", type(exc).__name__, exc)
    return problem_response(
        503,
        Unavailable.code,
        "the database is unavailable for a moment (a restart or failover); retry",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def install_error_handlers(app: FastAPI) -> None:
    # Handlers by class run inside the app (Starlette's ExceptionMiddleware), where the one for
    # Exception runs outermost and re-raises: the database's classes get theirs.
    for database_error in DATABASE_ERRORS:
        app.add_exception_handler(database_error, _database_error)
    app.add_exception_handler(AppError, _app_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
