"""Every Prometheus metric of the scheduler. Labels stay low-cardinality: no tenant or run labels."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

# Sub-second to 30 minutes: KEDA scales engines on this, and a backed-up queue lives in the tail.
LAG_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800)
FAST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
BATCH_BUCKETS = (0, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)

due_lag_seconds = Histogram(
    "scheduler_due_lag_seconds",
    "Claim time minus due_at of each claimed run (how late runs are when the engine takes them).",
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
    "scheduler_publish_failures_total", "Runs whose publish failed; they went back to pending at once."
)
runs_reaped_total = Counter(
    "scheduler_runs_reaped_total",
    "Runs rescued by the lease reaper, by what they were and what became of them.",
    ["from_status", "to_status"],
)
run_outcomes_total = Counter(
    "scheduler_run_outcomes_total", "Attempt outcomes recorded by workers.", ["status"]
)
stale_results_total = Counter(
    "scheduler_stale_results_total",
    "Deliveries or results dropped by the epoch fence (duplicate delivery, stale epoch, cancelled).",
    ["stage"],
)
execution_duration_seconds = Histogram(
    "scheduler_execution_duration_seconds",
    "Duration of executing one attempt's target.",
    ["target_type"],
    buckets=(*FAST_BUCKETS, 10, 30, 60, 300),
)
cron_runs_materialized_total = Counter(
    "scheduler_cron_runs_materialized_total", "Cron occurrences inserted as runs."
)
oldest_due_pending_age_seconds = Gauge(
    "scheduler_oldest_due_pending_age_seconds",
    "Age of the oldest due pending run, read from the database; it still moves when the engine stalls.",
)
partitions_at_risk = Gauge(
    "scheduler_partitions_at_risk",
    "Partitions past retention kept because they still hold non-terminal runs.",
)
partitions_total = Gauge("scheduler_partitions", "Daily partitions of job_runs (DEFAULT excluded).")
partitions_analyzed_total = Counter(
    "scheduler_partitions_analyzed_total",
    "Partitions ANALYZEd by the engine because their rows changed faster than autovacuum analyzes.",
)
default_partition_rows = Gauge(
    "scheduler_default_partition_rows", "Rows in the DEFAULT partition (moved out by maintenance)."
)
hot_index_events_total = Counter(
    "scheduler_hot_index_events_total", "Redis hot index hits, misses, stale ids and fallbacks.", ["event"]
)
unexpected_errors_total = Counter(
    "scheduler_unexpected_errors_total",
    "Unexpected exceptions a loop survived (logged with their traceback), by loop.",
    ["loop"],
)
runs_unbuildable_total = Counter(
    "scheduler_runs_unbuildable_total", "Claimed runs failed because their message could not be built."
)
runs_held_back = Gauge(
    "scheduler_worker_held_runs", "Fetched runs a worker holds back while their tenant is over its share."
)
runs_handed_back_total = Counter(
    "scheduler_worker_runs_handed_back_total",
    "Held-back runs a worker nak'ed back to the stream to look past one tenant's backlog.",
)
