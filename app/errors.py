"""One error base class; one handler renders every error as RFC 9457 problem details.

Each subclass names its problem kind by a stable snake_case `code` (an extension member of the
body, what clients switch on). Every kind means exactly what its HTTP status means, so `type` is
`about:blank` and `title` the status phrase (RFC 9457 §4.2.1); `detail` says what went wrong this
time and `field` which input it was.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

PROBLEM_JSON = "application/problem+json"
PROBLEM_TYPE = "about:blank"


# RFC 9110's names where Python's table is older (it changed in 3.13): one title per status on
# every interpreter.
_TITLES = {413: "Content Too Large", 422: "Unprocessable Content"}


def problem(status: int, code: str, detail: str, field: str | None = None) -> dict[str, Any]:
    """A problem details object (RFC 9457) with our extension members `code` and `field`."""
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE,
        "title": _TITLES.get(status) or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
    }
    if field is not None:
        body["field"] = field
    return body


class AppError(Exception):
    status_code = 400
    code = "bad_request"

    def __init__(self, message: str, *, field: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return problem(self.status_code, self.code, self.message, self.field)


class InvalidInput(AppError):
    status_code = 422
    code = "invalid_input"


class Unauthorized(AppError):
    status_code = 401
    code = "unauthorized"


class Forbidden(AppError):
    status_code = 403
    code = "forbidden"


class NotFound(AppError):
    status_code = 404
    code = "not_found"


class Conflict(AppError):
    status_code = 409
    code = "conflict"


class PayloadTooLarge(AppError):
    status_code = 413
    code = "payload_too_large"


class UnsupportedMediaType(AppError):
    status_code = 415
    code = "unsupported_media_type"


class OverQuota(AppError):
    status_code = 429
    code = "over_quota"


class Unavailable(AppError):
    status_code = 503
    code = "unavailable"
