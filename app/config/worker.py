"""A worker's settings: its slots and each tenant's share of them, and what it does with targets
(their answers and `Retry-After`, webhook signing secrets, completion callbacks)."""

from __future__ import annotations

from pydantic import Field

from app.config.group import SettingsGroup


class Worker(SettingsGroup):
    # 512 rather than 256: with twice the runs in flight the start and outcome statements carry twice
    # the runs, so each run pays half their planning, commit and round trip; a python handler's drain
    # ran 1.12x, Postgres's CPU a run 77 -> 70 us (docs/bench.md verdict 41). In flight at most, a
    # worker then holds 512 payloads and results (64 KiB each, bounded) and as many connections.
    worker_concurrency: int = Field(default=512, ge=1)
    """Targets a worker runs at once for one tenant; with one tenant over its share, up to one share more
    (below).
    """
    worker_fetch_batch: int = Field(default=256, ge=1)
    """Runs a worker fetches for its free slots at once, at most (in as many messages as the last ones'
    size says), and holds back beyond them; while every slot is taken, the messages one peek asks for.
    """
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


class Deliveries(SettingsGroup):
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
