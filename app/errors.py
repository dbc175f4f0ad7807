"""One error base class. Its class name is the API `error` code; one handler renders it."""

from __future__ import annotations

from typing import Any


class AppError(Exception):
    status_code = 400

    def __init__(self, message: str, *, field: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": type(self).__name__, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        return body


class InvalidInput(AppError):
    status_code = 422


class Unauthorized(AppError):
    status_code = 401


class Forbidden(AppError):
    status_code = 403


class NotFound(AppError):
    status_code = 404


class Conflict(AppError):
    status_code = 409


class PayloadTooLarge(AppError):
    status_code = 413


class OverQuota(AppError):
    status_code = 429


class Unavailable(AppError):
    status_code = 503
