"""verify_webhook: a worker's call checked per Standard Webhooks (the spec's own library)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import standardwebhooks


class WebhookVerificationError(standardwebhooks.WebhookVerificationError):
    """Not signed with any of the secrets, altered, or outside the 5-minute timestamp window."""


def verify_webhook(secret: str | Iterable[str], headers: Mapping[str, str], body: bytes | str) -> Any:
    """The parsed JSON body if the request is a genuine, fresh call signed with `secret` — or with
    any of several secrets, while a rotation has a receiver hold the new one and the old. The body
    is what was sent, whatever it is: an `http` target's run payload (the default), its envelope
    (a target with `"body": "envelope"`: {"type": "run.attempt", "timestamp", "data": {"run_id",
    ..., "payload"}}), or a completion callback's ({"type": "run.completed", "timestamp", "data":
    <the run>}). `body`: the raw bytes as received; `headers`: the request's (any mapping: a dict,
    Starlette's or httpx's Headers)."""
    secrets = [secret] if isinstance(secret, str) else list(secret)
    if not secrets:
        raise ValueError("verify_webhook needs at least one secret")
    plain = {name.lower(): value for name, value in headers.items()}
    failure: Exception | None = None
    for one in secrets:
        try:
            return standardwebhooks.Webhook(one).verify(body, plain)
        except standardwebhooks.WebhookVerificationError as error:
            failure = error
    raise WebhookVerificationError(str(failure)) from failure
