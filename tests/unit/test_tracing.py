"""The traceparents formatted without building a span match what the SDK's unrecorded spans would
propagate: same trace as the parent, a fresh span id, the sampled flag off, the random-trace-id flag
as the SDK sets it."""

from __future__ import annotations

import re

from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from app.telemetry.tracing import child_traceparent, unsampled_traceparent

W3C = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-(0[02])")
PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def sdk_child(parent: str | None) -> str:
    """What the SDK writes for an unsampled span started under `parent`."""
    tracer = TracerProvider(sampler=ALWAYS_OFF).get_tracer("test")
    ctx = propagate.extract({"traceparent": parent} if parent else {})
    span = tracer.start_span("x", context=ctx)
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return carrier["traceparent"]


def test_a_child_keeps_the_parents_trace_with_a_new_span() -> None:
    for flags in ("00", "01", "02", "03"):
        parent = PARENT[:-2] + flags
        ours, theirs = W3C.fullmatch(child_traceparent(parent)), W3C.fullmatch(sdk_child(parent))
        assert ours is not None and theirs is not None
        assert ours.group(1) == theirs.group(1) == PARENT.split("-")[1]
        assert ours.group(2) != PARENT.split("-")[2]
        assert ours.group(3) == theirs.group(3)


def test_no_or_a_malformed_parent_starts_a_new_trace() -> None:
    theirs = W3C.fullmatch(sdk_child(None))  # the SDK's new unsampled root
    assert theirs is not None
    zero_span = "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01"
    for parent in (None, "", "garbage", "00-" + "0" * 32 + "-00f067aa0ba902b7-01", zero_span, PARENT.upper()):
        ours = W3C.fullmatch(child_traceparent(parent))
        assert ours is not None and ours.group(1) != PARENT.split("-")[1] and ours.group(1) != "0" * 32
        assert ours.group(3) == theirs.group(3)


def test_roots_are_valid_and_distinct() -> None:
    roots = {unsampled_traceparent() for _ in range(100)}
    assert len(roots) == 100 and all(W3C.fullmatch(r) for r in roots)
