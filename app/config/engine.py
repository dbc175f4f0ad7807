"""An engine's settings: how it dispatches runs to the workers (claim, leases, backpressure, the
JetStream streams and lanes they travel in) and its maintenance (cron, partitions, statistics)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, model_validator

from app.config.group import SettingsGroup


class Dispatch(SettingsGroup):
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

    @model_validator(mode="after")
    def _lanes_exist(self) -> Self:
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


class Maintenance(SettingsGroup):
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
