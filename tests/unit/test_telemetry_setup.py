"""Tracing export follows the standard OTLP variables: endpoint, and protocol grpc or http/protobuf."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

from app.telemetry.tracing import span_exporter

VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({}, None),  # nothing configured: nothing exported
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, None),  # a protocol alone exports nothing
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, GrpcExporter),  # the default
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            GrpcExporter,
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            HttpExporter,
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            },
            HttpExporter,
        ),  # the traces-specific variables win, as the specification says
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                "OTEL_EXPORTER_OTLP_PROTOCOL": " HTTP/Protobuf ",
            },
            HttpExporter,
        ),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, None),
    ],
)
def test_the_exporter_matches_the_protocol(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], expected: type | None
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    exporter = span_exporter()
    try:
        assert type(exporter) is expected if expected is not None else exporter is None
    finally:
        if exporter is not None:
            exporter.shutdown()


def test_an_unsupported_protocol_is_said(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    assert span_exporter() is None
    assert "http/json" in caplog.text and "not exported" in caplog.text
