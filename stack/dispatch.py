"""Driving an engine's dispatcher by hand, for tests and the bench: one batch claimed, sent and
settled without the loop's overlap, and the busy seconds of the loop's phases read from its metric
(scheduler_dispatch_phase_seconds_total)."""

from __future__ import annotations

from app.engine.dispatcher import Dispatcher
from app.telemetry import metrics

PHASES = ("claim", "publish", "settle")


async def dispatch_once(dispatcher: Dispatcher) -> int:
    """Claim, publish and settle one batch; how many runs were sent."""
    built, sent = await dispatcher.batches.claim_and_send()
    if built.rows:
        await dispatcher.batches.settle(built, sent)
    return len(built.rows)


def phase_seconds() -> dict[str, float]:
    """Busy seconds by phase so far in this process (every dispatcher's): subtract two readings."""
    return {p: float(metrics.dispatch_phase_seconds_total.labels(p)._value.get()) for p in PHASES}


def phase_seconds_since(before: dict[str, float]) -> dict[str, float]:
    now = phase_seconds()
    return {p: now[p] - before[p] for p in PHASES}
