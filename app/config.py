"""Settings, read from `SCHEDULER_*` environment variables. Imports nothing from the app."""

from __future__ import annotations

import os
import socket
from functools import lru_cache
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_owner() -> str:
    # Kubernetes sets HOSTNAME to the pod name, so each replica's lease owner is unique for free.
    return os.environ.get("HOSTNAME") or socket.gethostname()


def nats_servers(url: str) -> list[str]:
    """A NATS_URL's servers (one, or several separated by commas), as nats-py's `servers` list."""
    return [u.strip() for u in url.split(",") if u.strip()]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SCHEDULER_", extra="ignore", use_attribute_docstrings=True)

    # Connections. Unset URLs make `scheduler dev` start embedded servers; other commands require them.
    database_url: str | None = None
    """Postgres (15 or newer), e.g. `postgresql://app@db:5432/scheduler`."""
    nats_url: str | None = None
    """NATS with JetStream, e.g. `nats://nats:4222`; a cluster's servers separated by commas,
    `nats://n1:4222,nats://n2:4222,nats://n3:4222` (a connection moves to another when its server goes).
    """
    redis_url: str | None = None
    """Only for the hot index."""

    host: str = "127.0.0.1"
    """Bind address of the API, and of the engine's and worker's ops servers."""
    port: int = 8000
    """The API's port."""
    admin_token: str | None = None
    """Bearer token for tenant management; may act on any tenant."""
    engine: Literal["on", "off"] = "on"
    """`off`: the API process runs no engine."""
    api_workers: int = Field(default=1, ge=1, le=64)
    """API processes behind the port (uvicorn workers, each with its own engine unless `ENGINE=off`); one
    process uses one core at most.
    """
    owner: str = Field(default_factory=_default_owner)
    """Lease owner name; leave unset in Kubernetes (the pod name); default `$HOSTNAME`."""

    # Claim and leases.
    batch_size: int = Field(default=500, ge=1, le=10_000)
    """Runs per claim."""
    per_tenant_cap: int = Field(default=100, ge=1)
    """Each tenant's share of a claim batch: every tenant with due runs gets up to this many before the
    room left goes to the first remaining due runs, whoever's (work-conserving) — a fairness bound per
    batch, **not** a rate limit.
    """
    # Claimed, not yet started by a worker. If the engine dies before publishing, the run is rescued
    # after this long (once its claim is older than every message still waiting in the stream: a run
    # whose message waits behind slow workers is never re-sent; app/engine/reaper.py).
    dispatch_lease_seconds: float = Field(default=60.0, gt=0)
    """A claimed run not started by a worker within this is claimed again (higher epoch) — once nothing
    older waits in the stream: a run queued behind slow workers is never re-sent.
    """
    lease_seconds: float = Field(default=30.0, gt=0)  # running; heartbeats extend it
    """A running run whose worker stops heart-beating this long is retried or failed."""
    poll_interval_seconds: float = Field(default=0.5, gt=0)
    """Idle engine poll (jittered); submissions due now also wake engines by `NOTIFY`."""
    reap_interval_seconds: float = Field(default=2.0, gt=0)
    """How often an engine's reaper looks for lapsed dispatch leases and running runs whose worker stopped
    heart-beating.
    """
    # How often the keeper grants freed concurrency slots and holds runs of paused jobs that became
    # pending again (app.engine.keeper); a limited key starts a new run at most this late.
    keeper_interval_seconds: float = Field(default=0.2, gt=0)
    """How often an engine hands freed concurrency slots and rate limits' room to waiting runs and re-holds
    a paused job's run made pending behind the service's back (docs/flow-control.md).
    """
    # A pass with nothing to expire is one probe of an index that holds only the deadlines still to
    # meet (migration 0019), so a pass a second costs nothing; the interval is the precision users see.
    expire_interval_seconds: float = Field(default=1.0, gt=0)
    """How often an engine ends the runs not started by their deadline (`expires_at`): a run shows
    `expired` at most about this long after it (a worker never starts one past it; docs/runs.md).
    """
    # A rate limit's start is the database's time of the fenced start; the request reaches the
    # limited API after the worker sends it, later by its event loop's delay (tens of ms, more on a
    # busy host). Each start counts this much longer than the period, so that the API, which counts
    # arrivals, never sees more than the limit in one window (migration 0013).
    rate_limit_margin_seconds: float = Field(default=0.25, ge=0, le=60)
    """How much longer than its rate limit's period a start counts: the slack for the way from the run's
    start in the database to its request at the target (docs/flow-control.md).
    """
    publish_timeout_seconds: float = Field(default=5.0, gt=0)
    """How long the engine waits for a batch's PubAcks before it sends what was not acked again."""
    # What JetStream did not ack is sent again, with a doubling backoff, for this long (at most half
    # the dispatch lease) before its runs go back to pending: a stream electing a new leader answers
    # "no responders" for seconds, and releasing at once had the loop claim and release the same runs
    # over and over. The same Nats-Msg-Id makes a message the stream did store a duplicate it drops.
    publish_retry_seconds: float = Field(default=30.0, ge=0)
    """How long the engine keeps sending what JetStream did not ack (doubling backoff, 0.25 s up to 2 s; at
    most half `DISPATCH_LEASE_SECONDS`) before those runs go back to pending: a stream electing a new
    leader refuses publishes for seconds.
    """
    dispatch_batches_in_flight: int = Field(default=2, ge=1, le=16)
    """Claimed batches whose PubAcks an engine still awaits while it claims the next."""
    # Backpressure (app/engine/backlog.py): stop claiming while the stream holds more than the workers
    # take in `max_queue_seconds` at their measured rate (at least one round of claim batches), or
    # more than `max_queued_messages` at all (the stream's memory). The rest waits pending, where the
    # claim is fair per tenant. The time bound applied is at most half the dispatch lease, so that a
    # lapsed lease still means "the message is gone", not "the workers are slow". The default bounds
    # what an urgent run or a newly arrived tenant waits behind in the stream (the claim orders and
    # shares only what is still pending) at no cost to the drain (decision 15).
    max_queue_seconds: float = Field(default=1.0, gt=0)
    """Engines stop claiming while the stream holds more than the workers take in this long at their
    measured rate (at least one round of claim batches; at most half of `DISPATCH_LEASE_SECONDS`); the
    rest waits pending, where the claim is fair per tenant.
    """
    max_queued_messages: int = Field(default=20_000, ge=1)
    """And while the workers' consumer holds this many messages at all (the stream's memory)."""
    # JetStream's cost is per message, not per byte (decision 13), so runs share messages.
    message_runs: int = Field(default=25, ge=1, le=1000)
    """Runs of one tenant and lane that one claim took travel in one message, up to this many (and 512
    KiB): JetStream's cost is per message (docs/bench.md verdict 29); `1`: a message a run.
    """
    hot_index: Literal["off", "redis"] = "off"
    """`redis`: Redis sorted set of due runs as a claim hint (see the bench verdict before turning it on)."""

    # JetStream names: tests and benches isolate themselves by changing them.
    stream: str = "RUNS"
    """The JetStream stream of the normal lane (the urgent lane's is this with `_URGENT`)."""
    subject_prefix: str = "runs"
    """Subjects of the normal lane are `<prefix>.<tenant>` (the urgent lane's `<prefix>_urgent.<tenant>`)."""
    consumer: str = "workers"
    """The workers' durable consumer on each lane's stream."""
    # A stream is delivered in the order it was filled, so an urgent run would wait behind everything
    # backpressure already let in; the urgent lane has its own room in backpressure (decision 12).
    urgent_priority: int = Field(default=4, ge=-1, le=9)
    """Runs of this priority or more urgent travel in the urgent lane: stream `RUNS_URGENT` (subjects
    `runs_urgent.<tenant>`), claimed by an engine loop of their own and fetched by a worker loop of
    their own, so they wait only behind urgent work; `-1`: one lane for every run.
    """
    lanes: Literal["all", "urgent", "normal"] = "all"
    """Which lanes an engine claims for and a worker fetches from: `urgent` or `normal` for processes of
    one lane, so urgent runs get engines and workers (and CPU) the bulk drain cannot take; run at least
    one engine and one worker per lane. `urgent` needs `URGENT_PRIORITY` ≥ 0.
    """
    # A message a worker received and has not answered is delivered again this long after the
    # worker's last in-progress ack (sent every quarter of it while the worker holds the message:
    # app/worker/completer.py). It bounds how long a killed worker's messages wait for another worker
    # (decision 19). Shorter costs more in-progress acks, and redelivers what a worker stalled for
    # three quarters of it holds; the epoch fence drops whatever of that was already started.
    ack_wait_seconds: float = Field(default=5.0, gt=0)
    """A message a worker received and has not answered goes to another worker this long after the worker's
    last in-progress ack (sent every quarter of it): what a killed worker had fetched waits no longer. A
    starting worker sets it on the workers' consumer.
    """
    # Copies JetStream keeps of each lane's stream and of the workers' consumers on it. 3 on a cluster
    # of three servers: any one server may be lost, messages and consumer state with it, and nothing
    # is (a stream's leader is elected again among the other two). A start raises an existing stream's
    # and consumer's replicas to this; it never lowers them.
    stream_replicas: int = Field(default=1, ge=1, le=5)
    """Copies (1 to 5) JetStream keeps of each lane's stream and of the workers' consumers: `3` on a cluster
    of three servers, so that losing any one loses nothing (docs/deploy.md, *NATS*); a start raises
    existing ones, never lowers them.
    """

    # Worker.
    worker_concurrency: int = Field(default=256, ge=1)
    """Targets a worker runs at once for one tenant; with one tenant over its share, up to one share more
    (below).
    """
    worker_fetch_batch: int = Field(default=256, ge=1)
    """Messages a worker asks JetStream for in one fetch, at most."""
    worker_grace_seconds: float = Field(default=25.0, ge=0)
    """On SIGTERM, in-flight runs get this long to finish; the worker exits within it (plus 2 s to record
    the last outcomes) even if the database is away.
    """
    # Each tenant's share of a worker's slots when tenants compete (app/worker/fairness.py); a tenant
    # alone still uses them all.
    worker_tenant_share: float = Field(default=0.25, gt=0, le=1)
    """Each tenant's share of a worker's slots when tenants compete (docs/api.md, "One tenant cannot
    slow another").
    """
    metrics_port: int = 9090  # `scheduler engine` and `scheduler worker` serve /metrics and health here
    """Ops port of `engine` and `worker`."""

    # Cron and partitions.
    cron_horizon_seconds: float = Field(default=60.0, gt=0)
    """Cron occurrences are materialized this far ahead."""
    cron_catchup_seconds: float = Field(default=3600.0, ge=0)
    """`misfire: all` fires missed occurrences at most this old."""
    premake_days: int = Field(default=7, ge=1)
    """Daily partitions created ahead."""
    retention_days: int = Field(default=30, ge=1)
    """Days of history kept; older days are dropped once all their runs are terminal."""
    audit_retention_days: int = Field(default=90, ge=1)
    """Days of the audit log kept (docs/audit.md); older days are dropped whole by partition maintenance."""
    maintenance_interval_seconds: float = Field(default=60.0, gt=0)
    """How often an engine runs its maintenance: partitions premade and retired, idempotency keys pruned."""
    # Fresh planner statistics for busy partitions (migration 0003): checked this often, a partition
    # is analyzed once this many of its rows changed since its last ANALYZE.
    analyze_interval_seconds: float = Field(default=5.0, gt=0)
    """How often an engine checks partitions' changed rows for a fresh `ANALYZE`."""
    analyze_after_changes: int = Field(default=10_000, ge=1)
    """A partition is re-`ANALYZE`d once this many of its rows changed (autovacuum does it once a minute at
    best).
    """

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
    # What a target answered, kept as the run's result (app/services/answers.py): over this, cut and
    # flagged. The worker reads no more than this of a webhook's answer, so it bounds memory too.
    max_result_bytes: int = Field(default=64 * 1024, ge=64, le=16 * 1024 * 1024)
    """A run's stored `result` (a handler's value, a webhook's body): over it, cut and flagged
    `result_truncated`; the worker reads no more of an answer.
    """
    # A 429/503's Retry-After delays the next attempt by at most this.
    max_retry_after_seconds: float = Field(default=3600.0, ge=0, le=7 * 86_400)
    """The longest delay a target's `Retry-After` (on 429/503) sets before the next attempt."""

    # Webhook signing secrets: how long a rotated-out secret keeps signing beside the new one, and how
    # long a worker caches a tenant's secrets (a rotation reaches every worker within that).
    signing_secret_overlap_seconds: float = Field(default=86_400.0, ge=0, le=7 * 86_400)
    """How long a rotated-out webhook signing secret keeps signing beside the new one."""
    signing_secret_cache_seconds: float = Field(default=10.0, gt=0, le=3600)
    """How long a worker caches a tenant's signing secrets: a rotation reaches every worker within this."""

    # Completion callbacks (app/worker/callbacks.py): one delivery may take CALLBACK_TIMEOUT_SECONDS
    # in all; a failed one is retried after BACKOFF·2^(attempt-1) (jittered, capped at MAX_BACKOFF)
    # until MAX_ATTEMPTS were made. A worker delivers CONCURRENCY at once, at most TENANT_CONCURRENCY
    # of one tenant, and looks for due callbacks every POLL_SECONDS.
    callback_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    """Completion callbacks: one attempt's whole time, however slowly the answer comes."""
    callback_max_attempts: int = Field(default=10, ge=1, le=100)
    """Completion callbacks: attempts in all."""
    callback_backoff_seconds: float = Field(default=5.0, ge=0, le=86_400)
    """Completion callbacks: the first retry's delay, doubled each time, jittered."""
    callback_max_backoff_seconds: float = Field(default=3600.0, ge=0, le=86_400)
    """Completion callbacks: the longest delay between attempts."""
    callback_concurrency: int = Field(default=64, ge=1, le=4096)
    """Callbacks one worker delivers at once."""
    callback_tenant_concurrency: int = Field(default=8, ge=1, le=4096)
    """Callbacks of one tenant one worker delivers at once."""
    callback_poll_seconds: float = Field(default=1.0, gt=0, le=60)
    """How often a worker looks for callbacks due."""

    data_dir: str = ".scheduler-dev"
    """`scheduler dev` only: where it keeps the embedded servers' data, `admin_token`, `demo_key` and its
    lock.
    """
    log_level: str = "INFO"
    """Log level of every process (`DEBUG`, `INFO`, `WARNING`, `ERROR`); attempts' outcomes are logged in
    `scheduler dev` only.
    """

    @field_validator("nats_url")
    @classmethod
    def _nats_servers(cls, value: str | None) -> str | None:
        if value is not None and value.strip() and not all(u.strip() for u in value.split(",")):
            raise ValueError("NATS_URL: an empty server in the list")
        return value

    @property
    def nats_servers(self) -> list[str]:
        return nats_servers(self.nats_url or "")

    @field_validator("database_url")
    @classmethod
    def _asyncpg_dsn(cls, value: str | None) -> str | None:
        # Accept SQLAlchemy-style URLs too; asyncpg wants a plain postgresql:// DSN.
        if value and value.startswith("postgresql+asyncpg://"):
            return "postgresql://" + value.removeprefix("postgresql+asyncpg://")
        return value

    @model_validator(mode="after")
    def _lanes_exist(self) -> Settings:
        if self.lanes == "urgent" and self.urgent_priority < 0:
            raise ValueError("LANES=urgent needs the urgent lane: URGENT_PRIORITY is -1")
        return self

    def serves(self, lane: str) -> bool:
        """Whether this process serves the lane named `urgent` or `normal`."""
        return self.lanes in ("all", lane)

    def is_urgent(self, priority: int) -> bool:
        """Whether a run of this priority travels in the urgent lane."""
        return priority <= self.urgent_priority

    def subject_for(self, tenant_id: str, priority: int) -> str:
        """The run's subject: its lane's prefix, then its tenant."""
        if self.is_urgent(priority):
            return f"{self.urgent_subject_prefix}.{tenant_id}"
        return f"{self.subject_prefix}.{tenant_id}"

    @property
    def urgent_stream(self) -> str:
        return f"{self.stream}_URGENT"

    @property
    def urgent_subject_prefix(self) -> str:
        # Outside `{subject_prefix}.>`: two streams may not share a subject.
        return f"{self.subject_prefix}_urgent"


@lru_cache
def get_settings() -> Settings:
    return Settings()
