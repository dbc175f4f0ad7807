"""The API's settings: the tenants' backlog quota, the bounds on what a request may carry, and the
HTTP front door (app/api/protocol.py)."""

from __future__ import annotations

from pydantic import Field

from app.config.group import SettingsGroup


class Api(SettingsGroup):
    # Admission and input limits.
    tenant_max_pending: int = Field(default=100_000, ge=1)
    """Backlog quota: over it, submissions get 429 with `Retry-After`, and cron occurrences are skipped
    (docs/api.md, "Admission").
    """
    max_payload_bytes: int = Field(default=65_536, ge=1)
    """Per-run payload limit (413)."""
    # Nesting of a payload's arrays and objects, and of a result's (deeper, it is kept as text and
    # flagged: app/services/answers.py). Real documents rarely pass ten; the engine's message, the
    # API's listing and a callback's envelope add two or three levels and orjson stops at 254, so 32
    # leaves every JSON codec on the way a wide margin.
    max_payload_depth: int = Field(default=32, ge=1, le=200)
    """Nesting of a payload's arrays and objects (422), and of a stored `result` (deeper: kept as its text,
    flagged `result_truncated`).
    """
    # Job definitions per tenant: each cron job materializes runs on its own, so the count is bounded.
    tenant_max_jobs: int = Field(default=1000, ge=1)
    """Job definitions per tenant; a PUT that would add one more is 422 (`field: name`)."""
    max_request_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    """A batch request's body (413, from `Content-Length` before it is read); any other body: four times
    `MAX_PAYLOAD_BYTES` plus 64 KiB.
    """
    # A request's line and headers together; over it, 431 before the parser sees more (app/api/protocol.py).
    max_header_bytes: int = Field(default=16 * 1024, ge=1024)
    """A request's line and headers together (431); at most 100 header lines."""
    # How long an idle keep-alive connection stays open. Longer than the idle expiry of the clients
    # and load balancers in front (httpx and most pools 5 s, AWS ALB 60 s), so they close it, never
    # the server: one that does races the client's next request on it, which then gets a connection
    # reset instead of an answer (an unanswered POST).
    http_keep_alive_seconds: float = Field(default=75.0, gt=0, le=3600)
    """How long the API keeps an idle keep-alive connection; keep it above the idle timeout of your clients
    and load balancer (AWS ALB: 60 s), so they close idle connections, never the server (a close racing
    a request resets it).
    """
    # The front door (app/api/protocol.py). A request's head must arrive within HEAD_TIMEOUT (of the
    # connection's opening, or of its first byte on a kept-alive connection) and its body within
    # BODY_TIMEOUT plus a second per BODY_MIN_RATE bytes; slower connections are closed. From
    # MAX_CONNECTIONS connections open (or requests in flight) a request is answered 503, the health
    # probes excepted; beyond twice as many (at most the process's file descriptors less 256) a new
    # connection is answered 503 and closed unread, and beyond MAX_CONNECTIONS_PER_CLIENT of one
    # peer address (0: no bound; behind a proxy every connection is the proxy's).
    http_head_timeout_seconds: float = Field(default=10.0, gt=0, le=3600)
    """A request's line and headers must arrive within this of the connection's opening (or of the
    request's first byte on a kept-alive connection); slower: 408 and closed (one that sent nothing:
    closed).
    """
    http_body_timeout_seconds: float = Field(default=10.0, gt=0, le=3600)
    """A request body must arrive within this many seconds plus one per `HTTP_BODY_MIN_RATE` bytes received
    (Apache's `mod_reqtimeout` rule); slower: the connection is closed.
    """
    http_body_min_rate: int = Field(default=16_384, ge=1)  # bytes a second
    """Bytes a second a request body must keep up, beyond `HTTP_BODY_TIMEOUT_SECONDS`."""
    http_max_connections: int = Field(default=1000, ge=1)
    """From this many open connections (or requests in flight) a request is answered 503, `/healthz` and
    `/readyz` excepted; beyond twice as many (at most the process's open-file limit less 256) a new
    connection is answered 503 and closed before anything is read.
    """
    http_max_connections_per_client: int = Field(default=0, ge=0)
    """Connections of one peer address; past it, 503 and closed unread. `0`: no bound — behind a proxy
    every connection is the proxy's (docs/deploy.md, "The front door").
    """
    # Where browsers reach the API (the dashboard): an https URL makes its cookies Secure whatever
    # the scheme of the hop in front of the server says.
    public_url: str | None = Field(default=None, pattern=r"^https?://[^\s/]+(/\S*)?$")
    """Where browsers reach the API, e.g. `https://scheduler.example.com`: an `https` URL makes the
    dashboard's cookies `Secure` whatever the hop in front of the server speaks.
    """
    # Proxies whose X-Forwarded-For and X-Forwarded-Proto uvicorn believes (comma-separated
    # addresses or networks, `*` for any); unset: uvicorn's default, 127.0.0.1 and ::1.
    forwarded_allow_ips: str | None = None
    """Proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` the API believes (comma-separated addresses
    or networks, `*` for any).
    """
    max_batch: int = Field(default=1000, ge=1)
    """Runs per batch submission."""
    max_schedule_ahead_days: int = Field(default=366, ge=1)
    """How far ahead of now a `scheduled_at` may lie (422)."""
    max_schedule_behind_days: int = Field(default=7, ge=0)
    """How far behind now a `scheduled_at` may lie (422)."""
    allow_private_targets: bool = False
    """Allow webhook targets and callbacks on loopback and private addresses (`scheduler dev` sets it);
    cloud metadata addresses stay refused.
    """
