"""OpenTelemetry setup and W3C trace-context propagation.

Propagation is always on (a traceparent is minted and carried even with no exporter); spans are
exported only when OTEL_EXPORTER_OTLP_ENDPOINT is set."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from opentelemetry import context, propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

_configured = False


def setup_tracing(service_name: str, extra_processor: SpanProcessor | None = None) -> None:
    """Install an SDK tracer provider once per process; the OTLP exporter only when configured."""
    global _configured
    if _configured:
        if extra_processor is not None:
            provider = trace.get_tracer_provider()
            if isinstance(provider, TracerProvider):
                provider.add_span_processor(extra_processor)
        return
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if extra_processor is not None:
        provider.add_span_processor(extra_processor)
    trace.set_tracer_provider(provider)
    _configured = True


def tracer(name: str) -> trace.Tracer:
    return trace.get_tracer(name)


def current_traceparent() -> str | None:
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent")


def inject(headers: dict[str, str], ctx: context.Context | None = None) -> dict[str, str]:
    propagate.inject(headers, context=ctx)
    return headers


def extract(headers: Mapping[str, Any] | None) -> context.Context:
    return propagate.extract(dict(headers or {}))


def link_to(traceparent: str | None) -> list[trace.Link]:
    """A link to the submitting request's span, when the run carries its traceparent."""
    if not traceparent:
        return []
    span_context = trace.get_current_span(propagate.extract({"traceparent": traceparent})).get_span_context()
    return [trace.Link(span_context)] if span_context.is_valid else []
