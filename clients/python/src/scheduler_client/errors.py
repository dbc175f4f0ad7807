"""ApiError: every answer of the API that is not a success, with its RFC 9457 problem details."""

from __future__ import annotations

import json
from typing import Any

import httpx


class ApiError(Exception):
    """The API refused or failed a request. `status` is the HTTP status; `code` the API's stable
    name for the problem (`invalid_input`, `not_found`, `conflict`, `over_quota`, ...); `field` the
    input at fault, when one is; `detail` what went wrong; `problem` the whole problem object.
    An answer that is not problem details (a proxy's error page) gets `code` "http_error" and the
    start of its body as `detail`."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        field: str | None = None,
        *,
        problem: dict[str, Any] | None = None,
        headers: httpx.Headers | None = None,
    ):
        super().__init__(f"{status} {code}: {detail}" + (f" (field {field})" if field else ""))
        self.status = status
        self.code = code
        self.detail = detail
        self.field = field
        self.problem = problem or {}
        self.headers = headers or httpx.Headers()

    @classmethod
    def from_response(cls, response: httpx.Response) -> ApiError:
        """The error a read response stands for."""
        try:
            body = json.loads(response.content)
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("detail"), str):
            return cls(
                response.status_code,
                str(body.get("code") or "http_error"),
                body["detail"],
                body.get("field") if isinstance(body.get("field"), str) else None,
                problem=body,
                headers=response.headers,
            )
        text = response.content[:500].decode(errors="replace").strip()
        return cls(
            response.status_code, "http_error", text or response.reason_phrase, headers=response.headers
        )
