"""OpenTelemetry setup and W3C trace-context propagation.

Propagation is always on: every run gets real trace and span ids in its traceparent, even with no
exporter. Spans are *recorded* only when something consumes them (OTEL_EXPORTER_OTLP_ENDPOINT is set,
or a processor was added): a recorded span that nobody exports cost 71 µs per dispatched run,
about a fifth of the engine loop (measured by `scheduler bench dispatch`)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from random import getrandbits
from typing import Any

from opentelemetry import context, propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    Sampler,
    SamplingResult,
    _get_from_env_or_default,
)

log = logging.getLogger(__name__)
_configured = False
# FastAPI's own OpenTelemetry layer switches itself on for any SDK tracer provider: every app passes
# this, and spans come from opentelemetry-instrumentation-fastapi where they are wanted (the API's
# routes), never from scrapes and probes.
NO_NATIVE_TELEMETRY: Any = {"tracing": False, "metrics": False, "logs": False}


class WhenExporting(Sampler):
    """Samples as configured (OTEL_TRACES_SAMPLER) once a span processor exists, drops otherwise.
    A dropped span still has a valid context, so traceparent propagation is unaffected."""

    def __init__(self) -> None:
        self.exporting = False
        self._configured: Sampler = _get_from_env_or_default()

    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        sampler = self._configured if self.exporting else ALWAYS_OFF
        return sampler.should_sample(*args, **kwargs)

    def get_description(self) -> str:
        return f"WhenExporting({self._configured.get_description()})"


_sampler = WhenExporting()


def setup_tracing(service_name: str, extra_processor: SpanProcessor | None = None) -> None:
    """Install an SDK tracer provider once per process; the OTLP exporter only when configured."""
    global _configured
    if _configured:
        if extra_processor is not None:
            provider = trace.get_tracer_provider()
            if isinstance(provider, TracerProvider):
                provider.add_span_processor(extra_processor)
                _sampler.exporting = True
        return
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}), sampler=_sampler)
    exporter = span_exporter()
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter))
        _sampler.exporting = True
    if extra_processor is not None:
        provider.add_span_processor(extra_processor)
        _sampler.exporting = True
    trace.set_tracer_provider(provider)
    _configured = True


def span_exporter() -> SpanExporter | None:
    """The OTLP exporter the standard variables ask for, or None when no endpoint is set.
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL: `grpc` (the default, as
    before these were read) or `http/protobuf`. The Python exporters have no `http/json`; an
    unknown protocol exports nothing and says so, rather than stopping the process over tracing."""
    if not (
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    ):
        return None
    protocol = (
        (
            os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "grpc"
        )
        .strip()
        .lower()
    )
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc

        return Grpc()
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

        return Http()
    log.error(
        "OTEL_EXPORTER_OTLP_PROTOCOL=%r is not supported (grpc, http/protobuf): spans are not exported",
        protocol,
    )
    return None


def tracer(name: str) -> trace.Tracer:
    return trace.get_tracer(name)


_TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def submitter_traceparent(theirs: str | None) -> str | None:
    """The span context a run stores for its dispatch span to link to: the API's server span when
    the API records spans (its OpenTelemetry middleware is installed only then), else the caller's
    own traceparent header (`theirs`), if it is well-formed."""
    own = current_traceparent()
    if own is not None:
        return own
    return theirs if _well_formed(theirs) else None


def _well_formed(traceparent: str | None) -> bool:
    """A version-00 W3C traceparent whose trace and span ids are not all zeros (those are invalid)."""
    return (
        traceparent is not None
        and _TRACEPARENT.fullmatch(traceparent) is not None
        and traceparent[3:35] != "0" * 32
        and traceparent[36:52] != "0" * 16
    )


def current_traceparent() -> str | None:
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent")


def inject(headers: dict[str, str], ctx: context.Context | None = None) -> dict[str, str]:
    propagate.inject(headers, context=ctx)
    return headers


def extract(headers: Mapping[str, Any] | None) -> context.Context:
    return propagate.extract(dict(headers or {}))


def recording() -> bool:
    """Whether spans are recorded (something exports them); hot paths skip span decoration if not."""
    return _sampler.exporting


def link_to(traceparent: str | None) -> list[trace.Link]:
    """A link to the submitting request's span, when the run carries its traceparent. Parsing it is
    a third of a dispatch span's cost, so it is skipped when spans are not recorded."""
    if not traceparent or not _sampler.exporting:
        return []
    span_context = trace.get_current_span(propagate.extract({"traceparent": traceparent})).get_span_context()
    return [trace.Link(span_context)] if span_context.is_valid else []


# W3C trace flags: 01 sampled (never here: nothing records), 02 the trace id is random (level 2).
RANDOM_TRACE_ID = 0x02


def unsampled_traceparent() -> str:
    """A new root context's traceparent, unsampled, its trace id random: what propagating the SDK's
    non-recording span writes, without building that span. Ids are never all zeros (W3C)."""
    return f"00-{getrandbits(128) or 1:032x}-{getrandbits(64) or 1:016x}-{RANDOM_TRACE_ID:02x}"


def child_traceparent(parent: str | None) -> str:
    """A new unsampled span's traceparent under `parent` (a W3C header), or a new root when that is
    absent or malformed: what propagating the SDK's non-recording child span would write."""
    if parent is not None and _well_formed(parent):
        flags = int(parent[53:55], 16) & RANDOM_TRACE_ID  # the trace id's randomness carries over
        return f"00-{parent[3:35]}-{getrandbits(64) or 1:016x}-{flags:02x}"
    return unsampled_traceparent()
