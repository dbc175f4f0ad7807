"""What a job may call, checked the same way at job PUT (API) and before every request (worker).

Tenants name python handlers, never import paths: only callables the deployment registered in the
`scheduler.handlers` entry-point group can run, so no tenant can make a worker import arbitrary code.
Webhook hosts are resolved and refused when any address is on the deny list of
`app.services.addresses` (loopback, private, link-local, reserved, IPv4-embedding forms of those, cloud
metadata); the deployment may allow private targets (dev and tests do), never metadata ones.
"""

from __future__ import annotations

import asyncio
import re
import socket
from functools import lru_cache
from importlib.metadata import entry_points
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, HttpUrl, TypeAdapter
from pydantic_core import PydanticCustomError

from app.errors import InvalidInput
from app.services.addresses import forbidden_reason

HANDLER_GROUP = "scheduler.handlers"
# Headers a job may not set. The worker sets these itself (a job may not forge them), or they are
# hop-by-hop or describe the message's framing and encoding, which belong to the HTTP client: a job's
# `Transfer-Encoding: chunked` beside the client's Content-Length broke the request's framing.
RESERVED_HEADERS = frozenset(
    h.lower()
    for h in (
        "Scheduler-Run-Id",
        "Scheduler-Attempt",
        "Scheduler-Epoch",
        "traceparent",
        "tracestate",
        "Host",
        "Content-Length",
        "Content-Type",
        "Content-Encoding",
        "Transfer-Encoding",
        "TE",
        "Trailer",
        "Connection",
        "Keep-Alive",
        "Upgrade",
        "Expect",
        "HTTP2-Settings",
    )
)
# Whole families: the Standard Webhooks signature headers (webhook-id, -timestamp, -signature), our
# own, and the proxy ones (Proxy-Authorization, Proxy-Connection, ...).
RESERVED_HEADER_PREFIXES = ("webhook-", "scheduler-", "proxy-")


def is_reserved_header(name: str) -> bool:
    lower = name.lower()
    return lower in RESERVED_HEADERS or lower.startswith(RESERVED_HEADER_PREFIXES)


# Header names are RFC 9110 tokens. Values are RFC 9110 field values, strictly: visible ASCII, with
# spaces and tabs only between visible characters (no obs-text). A CR/LF would let a tenant inject
# headers into the worker's request, a NUL cannot be stored in jsonb, a character beyond ASCII
# ("é☃") failed every attempt with UnicodeEncodeError, and a leading or trailing space with h11's
# "Illegal header value": refused at PUT instead, naming the header.
HeaderName = Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")]
FIELD_VALUE = r"^(?:[\x21-\x7e]+(?:[ \t]+[\x21-\x7e]+)*)?$"
_FIELD_VALUE = re.compile(FIELD_VALUE)


def _field_value(value: str) -> str:
    if not _FIELD_VALUE.match(value):
        raise PydanticCustomError(
            "header_value",
            "a header value is visible ASCII, with spaces and tabs only between visible characters",
        )
    return value


# The pattern is the contract's (openapi.json); the check is the validator's, for a message a
# person can read.
HeaderValue = Annotated[
    str, Field(max_length=4096, json_schema_extra={"pattern": FIELD_VALUE}), AfterValidator(_field_value)
]


class HttpTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["http"]
    url: HttpUrl
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[HeaderName, HeaderValue] = Field(default_factory=dict, max_length=50)
    body: Literal["payload", "envelope"] = Field(
        default="payload",
        description="`payload`: the run's payload is the body, as GET /runs/{id} answers it, so any "
        "HTTP API can be a target. `envelope`: the Standard Webhooks envelope around it, which signs "
        "the run id, attempt, epoch, method and URL too (docs/webhooks.md).",
    )


class PythonTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["python"]
    handler: str = Field(min_length=1, max_length=200)


class NoopTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["noop"]


Target = Annotated[HttpTarget | PythonTarget | NoopTarget, Field(discriminator="type")]
_target_adapter: TypeAdapter[HttpTarget | PythonTarget | NoopTarget] = TypeAdapter(Target)


@lru_cache
def registered_handlers() -> frozenset[str]:
    return frozenset(ep.name for ep in entry_points(group=HANDLER_GROUP))


async def resolve_allowed(
    host: str, port: int, *, allow_private: bool, field: str = "target.url"
) -> list[str]:
    """Addresses the worker may connect to for this host. Raises InvalidInput naming `field` if none,
    or if any resolved address is forbidden (a name that resolves to both public and private is refused).

    One message for a name that does not resolve and one that resolves where a webhook may not go:
    two would tell a tenant which internal names exist, and which address and why would map the
    deployment's internal DNS."""
    unreachable = InvalidInput(
        f"{field} host {host!r} must resolve, and only to public addresses",
        field=field,
    )
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        raise unreachable from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if any(forbidden_reason(a, allow_private=allow_private) for a in addresses):
        raise unreachable
    return addresses


async def validate_target(raw: Any, *, allow_private: bool) -> dict[str, Any]:
    """Validate a job's target and return its normalized JSON form."""
    from pydantic import ValidationError

    try:
        target = _target_adapter.validate_python(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        # A discriminated union reports ("http", "url"): drop the tag, keep the field.
        parts = [str(p) for p in err["loc"]]
        if parts and parts[0] in ("http", "python", "noop"):
            parts = parts[1:]
        if parts[:1] == ["headers"] and len(parts) > 1:
            # A header's name is the tenant's data, not a field of ours: name the field, quote the header.
            raise InvalidInput(f"target.headers[{parts[1]!r}]: {err['msg']}", field="target.headers") from exc
        field = ".".join(["target", *parts])
        raise InvalidInput(f"{field}: {err['msg']}", field=field) from exc
    if isinstance(target, PythonTarget) and target.handler not in registered_handlers():
        known = ", ".join(sorted(registered_handlers())) or "none"
        raise InvalidInput(
            f"python handler {target.handler!r} is not registered (registered: {known})",
            field="target.handler",
        )
    if isinstance(target, HttpTarget):
        bad = sorted(h for h in target.headers if is_reserved_header(h))
        if bad:
            raise InvalidInput(f"target.headers may not set {', '.join(bad)}", field="target.headers")
        url = urlsplit(str(target.url))
        if url.username or url.password:
            raise InvalidInput("target.url must not carry credentials; use headers", field="target.url")
        assert url.hostname is not None
        port = url.port or (443 if url.scheme == "https" else 80)
        await resolve_allowed(url.hostname, port, allow_private=allow_private)
    return target.model_dump(mode="json")
