"""How both clients send an operation: the generated client they share (`api_client`), one call
of a generated endpoint (`Op`), a listing's pages (`Pages`), and a request body as the caller gave
it (`json_body`). The operations themselves are scheduler_client.operations."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, cast

import httpx

from scheduler_client.errors import ApiError
from scheduler_client.generated import AuthenticatedClient
from scheduler_client.generated.models import Problem
from scheduler_client.generated.types import Response


class _Page(Protocol):
    @property
    def next_cursor(self) -> str | None: ...


T = TypeVar("T")
P = TypeVar("P", bound=_Page)
M = TypeVar("M")

USER_AGENT = "scheduler-client (python)"


def api_client(
    base_url: str, api_key: str, timeout: float, transport: Any, raise_problem: Callable[..., Any]
) -> AuthenticatedClient:
    """The generated client that both clients send through: the key, a timeout per attempt, the
    retrying `transport` beneath, and `raise_problem`, the response hook that turns every answer
    but a success into ApiError (before the generated code parses it)."""
    return AuthenticatedClient(
        base_url=base_url.rstrip("/"),
        token=api_key,
        timeout=httpx.Timeout(timeout),
        headers={"User-Agent": USER_AGENT},
        httpx_args={"transport": transport, "event_hooks": {"response": [raise_problem]}},
    )


class Op(Generic[T]):
    """One call of a generated endpoint: its sync and async functions and their arguments."""

    def __init__(
        self,
        sync: Callable[..., Response[T | Problem]],
        asyncio: Callable[..., Awaitable[Response[T | Problem]]],
        *args: Any,
        **kwargs: Any,
    ):
        self.sync = sync
        self.asyncio = asyncio
        self.args = args
        self.kwargs = kwargs

    def result(self, response: Response[T | Problem]) -> T:
        """The answer's model. Errors never get here (the clients' response hook raises ApiError
        for them); a success the contract does not name (a 202, say) does not pass either."""
        parsed = response.parsed
        if response.status_code == 204:
            return cast(T, None)
        if parsed is None or isinstance(parsed, Problem):
            raise ApiError(
                int(response.status_code), "http_error", f"unexpected answer {response.status_code}"
            )
        return parsed


@dataclass(frozen=True)
class Pages(Generic[P, T]):
    """A listing: `page(cursor)` reads the page after `cursor` (None: the first); a page's items
    are its member `field` ("runs", "jobs"), and its `next_cursor` where the next page starts
    (None: it was the last)."""

    page: Callable[[str | None], Op[P]]
    field: str

    def items(self, page: P) -> Sequence[T]:
        return cast(Sequence[T], getattr(page, self.field))

    @staticmethod
    def next_cursor(page: P) -> str | None:
        return page.next_cursor


def _plain(value: Any) -> Any:
    """A value as JSON carries it: a model as its dict, a datetime in ISO 8601, a UUID as text."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


class _Json(dict[str, Any]):
    """A request body as the caller gave it, for the generated endpoints, which send
    `body.to_dict()`. The API is the one validator (its 422 names the field at fault): the
    generated request models would drop a field they do not know without a word (a typo, or a
    field newer than this client), and fail on a nested one missing with a misleading name."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self)


def json_body(model: type[M], fields: Mapping[str, Any]) -> M:
    """`fields` as the body the endpoint takes (`model`, for its type)."""
    return cast(M, _Json(_plain(fields)))


def as_uuid(value: uuid.UUID | str) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


def new_idempotency_key() -> str:
    return str(uuid.uuid4())
