"""openapi.json at the repo root is the app's schema, byte for byte (regenerate: python -m app.openapi)."""

from __future__ import annotations

import json

from app.config import Settings
from app.main import create_app
from app.openapi import DEFAULT_PATH, render


def test_openapi_json_matches_the_app() -> None:
    committed = DEFAULT_PATH.read_text()
    assert json.loads(committed) == create_app(Settings()).openapi(), (
        "stale openapi.json: run python -m app.openapi"
    )
    assert committed == render(), "openapi.json is not in canonical form: run python -m app.openapi"


def test_schema_documents_every_route_and_its_errors() -> None:
    schema = json.loads(DEFAULT_PATH.read_text())
    assert set(schema["paths"]) == {
        "/tenants",
        "/tenants/{tenant_id}/keys",
        "/tenants/{tenant_id}/keys/{key_id}",
        "/tenants/{tenant_id}/signing-secrets",
        "/tenants/{tenant_id}/jobs",
        "/tenants/{tenant_id}/jobs/{name}",
        "/tenants/{tenant_id}/runs",
        "/tenants/{tenant_id}/runs/batch",
        "/runs/{run_id}",
        "/runs/{run_id}/cancel",
        "/healthz",
        "/readyz",
    }
    submit = schema["paths"]["/tenants/{tenant_id}/runs"]["post"]
    assert {"200", "201", "401", "404", "409", "413", "422", "429"} <= set(submit["responses"])
    assert set(schema["components"]["schemas"]["Error"]["properties"]) == {"error", "message", "field"}
