"""Every Prometheus metric of the scheduler. Labels stay low-cardinality: no tenant or run labels."""

from __future__ import annotations

import contextlib

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

# Sub-second to 30 minutes: KEDA scales engines on this, and a backed-up queue lives in the tail.
LAG_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800)
FAST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
BATCH_BUCKETS = (0, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)

due_lag_seconds = Histogram(
    "scheduler_due_lag_seconds",
    "Claim time minus due_at of each claimed run (how late runs are when the engine takes them), by the "
    "lane it travels in: urgent or normal.",
    ["lane"],
    buckets=LAG_BUCKETS,
)
claim_batch_size = Histogram(
    "scheduler_claim_batch_size", "Runs returned by one claim statement.", buckets=BATCH_BUCKETS
)
claim_duration_seconds = Histogram(
    "scheduler_claim_duration_seconds", "Duration of one claim statement.", ["path"], buckets=FAST_BUCKETS
)
publish_duration_seconds = Histogram(
    "scheduler_publish_duration_seconds",
    "Duration of publishing one claimed batch to JetStream, every PubAck awaited.",
    buckets=FAST_BUCKETS,
)
dispatch_phase_seconds_total = Counter(
    "scheduler_dispatch_phase_seconds_total",
    "Busy time of the dispatch loop by phase: claim (SQL), publish (build, send, await PubAcks), settle.",
    ["phase"],
)
runs_claimed_total = Counter("scheduler_runs_claimed_total", "Runs claimed (pending -> dispatched).")
runs_published_total = Counter("scheduler_runs_published_total", "Runs published and acked by JetStream.")
publish_failures_total = Counter(
    "scheduler_publish_failures_total",
    "Runs JetStream did not ack, even sent again; they went back to pending.",
)
publish_retries_total = Counter(
    "scheduler_publish_retries_total",
    "Messages sent again because JetStream did not ack them (a stream electing its leader, a server lost).",
)
runs_reaped_total = Counter(
    "scheduler_runs_reaped_total",
    "Runs rescued by the lease reaper, by what they were and what became of them.",
    ["from_status", "to_status"],
)
run_outcomes_total = Counter(
    "scheduler_run_outcomes_total", "Attempt outcomes recorded by workers.", ["status"]
)
callbacks_delivered_total = Counter(
    "scheduler_callbacks_delivered_total", "Completion callbacks the receiver acknowledged (2xx)."
)
callbacks_failed_total = Counter(
    "scheduler_callbacks_failed_total",
    "Completion callback deliveries that failed: `final` when it was the last attempt, else `retry`.",
    ["attempt"],
)
stale_results_total = Counter(
    "scheduler_stale_results_total",
    "Deliveries or results dropped by the epoch fence (duplicate delivery, stale epoch, cancelled).",
    ["stage"],
)
starts_refused_total = Counter(
    "scheduler_starts_refused_total",
    "Runs a worker was about to start that went back to pending, held, because their job or tenant "
    "is paused.",
)
runs_expired_total = Counter(
    "scheduler_runs_expired_total",
    "Runs that ended expired, not started by their deadline (expires_at), by what ended them: the "
    "engines' `sweep` or a worker's `start`.",
    ["by"],
)
runs_retried_total = Counter(
    "scheduler_runs_retried_total",
    "Runs a person moved back to pending (failed, cancelled or expired -> pending), by the route: run "
    "or bulk.",
    ["via"],
)
runs_cancelled_while_running_total = Counter(
    "scheduler_runs_cancelled_while_running_total",
    "Running runs a person cancelled (their attempt closed as `cancelled`), by the route: run or bulk.",
    ["via"],
)
cancel_notices_total = Counter(
    "scheduler_cancel_notices_total",
    "Notices an API process sent the workers to stop cancelled runs (`sent`), or could not send "
    "(`unsent`: no NATS connection; the workers' heartbeats find those runs instead).",
    ["result"],
)
attempts_stopped_total = Counter(
    "scheduler_worker_attempts_stopped_total",
    "Attempts a worker stopped because their run was cancelled, by how it learned: the cancel's "
    "`notice` over NATS, or its `heartbeat` (the notice did not reach it).",
    ["via"],
)
runs_rescheduled_total = Counter(
    "scheduler_runs_rescheduled_total",
    "Pending runs whose due time a person moved (POST /runs/{id}/reschedule).",
)
bulk_run_changes_total = Counter(
    "scheduler_bulk_run_changes_total",
    "Runs changed by bulk actions (POST /tenants/{tenant_id}/runs/actions), by action.",
    ["action"],
)
execution_duration_seconds = Histogram(
    "scheduler_execution_duration_seconds",
    "Duration of executing one attempt's target.",
    ["target_type"],
    buckets=(*FAST_BUCKETS, 10, 30, 60, 300),
)
results_truncated_total = Counter(
    "scheduler_results_truncated_total",
    "Results (a handler's value, a webhook's body) cut to SCHEDULER_MAX_RESULT_BYTES and flagged.",
)
retry_after_honoured_total = Counter(
    "scheduler_retry_after_honoured_total",
    "Failed attempts whose 429/503 Retry-After (bounded) set the next delay instead of the backoff.",
)
submissions_deduplicated_total = Counter(
    "scheduler_submissions_deduplicated_total",
    "Submitted runs answered with a run that exists instead of a new one, by the job's rule: unique "
    "(a duplicate of a run holding its key) or debounce (folded into the pending run of its key).",
    ["rule"],
)
dedupe_keys_swept_total = Counter(
    "scheduler_dedupe_keys_swept_total",
    "Unique and debounce keys the engine deleted once they held nothing (a window over, a run ended).",
)
cron_runs_materialized_total = Counter(
    "scheduler_cron_runs_materialized_total", "Cron occurrences inserted as runs."
)
cron_occurrences_skipped_total = Counter(
    "scheduler_cron_occurrences_skipped_total",
    "Cron occurrences not made into runs, by reason: `quota`, their tenant at its backlog quota (logged "
    "too); `overlap`, their job's overlap policy (a run of it still live or waiting).",
    ["reason"],
)
for _reason in ("quota", "overlap"):  # both exported from the start, at 0
    cron_occurrences_skipped_total.labels(_reason)
# Gauges only an engine can read: created unregistered and exposed by a process that runs an
# engine (`expose_engine_metrics`). An API with SCHEDULER_ENGINE=off or a worker exported them as 0,
# so a max() over them read 0 — "no backlog" — when every engine was dead; absent, they say so.
ENGINE_ONLY: list[Gauge] = []
# Gauges only a worker exports, so `absent(...)` of one tells that no worker is up.
WORKER_ONLY: list[Gauge] = []


def engine_gauge(name: str, documentation: str, labelnames: tuple[str, ...] = ()) -> Gauge:
    """A gauge only engines export (see ENGINE_ONLY): anything read from the database for them."""
    gauge = Gauge(name, documentation, labelnames, registry=None)
    ENGINE_ONLY.append(gauge)
    return gauge


def worker_gauge(name: str, documentation: str) -> Gauge:
    gauge = Gauge(name, documentation, registry=None)
    WORKER_ONLY.append(gauge)
    return gauge


oldest_due_pending_age_seconds = engine_gauge(
    "scheduler_oldest_due_pending_age_seconds",
    "Age of the oldest due pending run, read from the database; it still moves when the engine stalls.",
)
due_pending_runs = engine_gauge(
    "scheduler_due_pending_runs",
    "Due runs still pending, read from the database (counted up to 20,000). Engines scale on the "
    "due backlog only while they are not paused by backpressure (scheduler_dispatch_paused).",
)
dispatch_paused = engine_gauge(
    "scheduler_dispatch_paused",
    "1 while this engine holds claims because the workers' queue is full: the workers bind, not engines.",
)
worker_backlog_messages = engine_gauge(
    "scheduler_worker_backlog_messages",
    "Messages the workers' consumer holds, as an engine last read it: waiting (not yet delivered) "
    "and in_flight (delivered, not yet acked: starting or executing).",
    ("state",),
)
worker_backlog_runs = engine_gauge(
    "scheduler_worker_backlog_runs",
    "Runs the workers' consumer holds, as an engine last read it (its messages times the runs a "
    "message of this engine carried lately): waiting and in_flight. What the workers' autoscaler reads.",
    ("state",),
)
worker_delivery_rate = engine_gauge(
    "scheduler_worker_delivery_rate",
    "Messages per second the workers take from the stream, as an engine measures it (sizes backpressure).",
)
partitions_at_risk = engine_gauge(
    "scheduler_partitions_at_risk",
    "Partitions past retention kept because they still hold non-terminal runs.",
)
partitions_total = engine_gauge("scheduler_partitions", "Daily partitions of job_runs (DEFAULT excluded).")
default_partition_rows = engine_gauge(
    "scheduler_default_partition_rows",
    "Rows in the DEFAULT partition (moved out by maintenance).",
)
held_runs = engine_gauge(
    "scheduler_held_runs",
    "Pending runs held back, by reason: paused (their job or tenant), concurrency (waiting for a "
    "slot of their key or of their tenant's max_in_flight) or rate_limit (waiting for room in their "
    "key's window); read from the database, each counted up to 20,000.",
    ("reason",),
)
concurrency_slots_granted_total = Counter(
    "scheduler_concurrency_slots_granted_total", "Runs the keeper gave a concurrency slot to."
)
rate_limit_grants_total = Counter(
    "scheduler_rate_limit_grants_total", "Runs the keeper made due within their key's rate limit."
)
flow_rows_swept_total = Counter(
    "scheduler_flow_rows_swept_total",
    "Flow-control bookkeeping the keeper deleted once unused: concurrency_slots (a key's lock row) or "
    "rate_limit_starts (a start that left its window).",
    ("table",),
)
runs_reheld_total = Counter(
    "scheduler_runs_reheld_total",
    "Runs the keeper held after the fact: of a paused job or tenant that became pending again (a retry, "
    "a rescue).",
)
worker_slots = worker_gauge(
    "scheduler_worker_slots",
    "Targets this worker runs at once (SCHEDULER_WORKER_CONCURRENCY); absent when no worker is up.",
)
partitions_analyzed_total = Counter(
    "scheduler_partitions_analyzed_total",
    "Partitions ANALYZEd by the engine because their rows changed faster than autovacuum analyzes.",
)
hot_index_events_total = Counter(
    "scheduler_hot_index_events_total", "Redis hot index hits, misses, stale ids and fallbacks.", ["event"]
)


def _expose(tier: list[Gauge], registry: CollectorRegistry) -> None:
    for gauge in tier:
        with contextlib.suppress(ValueError):  # registered already: one process may run both roles
            registry.register(gauge)


def expose_engine_metrics(registry: CollectorRegistry = REGISTRY) -> None:
    """Called by a process that runs an engine (`scheduler engine`, an API with its engine on)."""
    _expose(ENGINE_ONLY, registry)


def expose_worker_metrics(concurrency: int, registry: CollectorRegistry = REGISTRY) -> None:
    """Called by a process that runs a worker."""
    worker_slots.set(concurrency)
    _expose(WORKER_ONLY, registry)


unexpected_errors_total = Counter(
    "scheduler_unexpected_errors_total",
    "Unexpected exceptions a background service survived (logged with their traceback), by service "
    "(app/background.py).",
    ["service"],
)
runs_unbuildable_total = Counter(
    "scheduler_runs_unbuildable_total", "Claimed runs failed because their message could not be built."
)
runs_held_back = Gauge(
    "scheduler_worker_held_runs", "Fetched runs a worker holds back while their tenant is over its share."
)
worker_fetch_size = Histogram(
    "scheduler_worker_fetch_size",
    "Messages one fetch of a worker's loop took, each fetch one start batch at most (0: nothing came "
    "within its wait), by lane.",
    ["lane"],
    buckets=BATCH_BUCKETS,
)
runs_handed_back_total = Counter(
    "scheduler_worker_runs_handed_back_total",
    "Held-back runs a worker nak'ed back to the stream to look past one tenant's backlog.",
)
