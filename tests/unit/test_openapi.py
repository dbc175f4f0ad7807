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
        "/tenants/{tenant_id}",
        "/tenants/{tenant_id}/keys",
        "/tenants/{tenant_id}/keys/{key_id}",
        "/tenants/{tenant_id}/signing-secrets",
        "/tenants/{tenant_id}/jobs",
        "/tenants/{tenant_id}/jobs/{name}",
        "/tenants/{tenant_id}/runs",
        "/tenants/{tenant_id}/runs/batch",
        "/runs/{run_id}",
        "/runs/{run_id}/cancel",
        "/tenants/{tenant_id}/jobs/{name}/pause",
        "/tenants/{tenant_id}/jobs/{name}/resume",
        "/tenants/{tenant_id}/jobs/{name}/backfill",
        "/tenants/{tenant_id}/pause",
        "/tenants/{tenant_id}/resume",
        "/runs/{run_id}/retry",
        "/runs/{run_id}/reschedule",
        "/tenants/{tenant_id}/runs/actions",
        "/tenants/{tenant_id}/groups",
        "/tenants/{tenant_id}/groups/{group_id}",
        "/tenants/{tenant_id}/events/{name}",
        "/tenants/{tenant_id}/audit",
        "/healthz",
        "/readyz",
    }
    submit = schema["paths"]["/tenants/{tenant_id}/runs"]["post"]
    assert {"200", "201", "401", "404", "409", "413", "422", "429"} <= set(submit["responses"])
    problem = schema["components"]["schemas"]["Problem"]
    assert set(problem["properties"]) == {"type", "title", "status", "detail", "code", "field"}
    for path in schema["paths"].values():
        for operation in path.values():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")) and status != "503":  # /readyz answers 503 with Health
                    assert list(response["content"]) == ["application/problem+json"], (operation, status)
    assert submit["responses"]["429"]["headers"]["Retry-After"]["schema"]["type"] == "integer"


def test_every_operation_has_a_named_id_and_the_bearer_scheme() -> None:
    schema = json.loads(DEFAULT_PATH.read_text())
    ids = {
        f"{method.upper()} {path}": operation["operationId"]
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
    }
    assert ids == {
        "POST /tenants": "createTenant",
        "GET /tenants/{tenant_id}": "getTenant",
        "PATCH /tenants/{tenant_id}": "patchTenant",
        "POST /tenants/{tenant_id}/keys": "createKey",
        "GET /tenants/{tenant_id}/keys": "listKeys",
        "DELETE /tenants/{tenant_id}/keys/{key_id}": "revokeKey",
        "POST /tenants/{tenant_id}/signing-secrets": "rotateSigningSecret",
        "PUT /tenants/{tenant_id}/jobs/{name}": "putJob",
        "GET /tenants/{tenant_id}/jobs/{name}": "getJob",
        "GET /tenants/{tenant_id}/jobs": "listJobs",
        "DELETE /tenants/{tenant_id}/jobs/{name}": "deleteJob",
        "POST /tenants/{tenant_id}/runs": "submitRun",
        "POST /tenants/{tenant_id}/runs/batch": "submitRunBatch",
        "GET /tenants/{tenant_id}/runs": "listRuns",
        "GET /tenants/{tenant_id}/groups": "listGroups",
        "GET /tenants/{tenant_id}/groups/{group_id}": "getGroup",
        "POST /tenants/{tenant_id}/events/{name}": "publishEvent",
        "GET /runs/{run_id}": "getRun",
        "POST /runs/{run_id}/cancel": "cancelRun",
        "POST /tenants/{tenant_id}/jobs/{name}/pause": "pauseJob",
        "POST /tenants/{tenant_id}/jobs/{name}/resume": "resumeJob",
        "POST /tenants/{tenant_id}/jobs/{name}/backfill": "backfillJob",
        "POST /tenants/{tenant_id}/pause": "pauseTenant",
        "POST /tenants/{tenant_id}/resume": "resumeTenant",
        "POST /runs/{run_id}/retry": "retryRun",
        "POST /runs/{run_id}/reschedule": "rescheduleRun",
        "POST /tenants/{tenant_id}/runs/actions": "actOnRuns",
        "GET /tenants/{tenant_id}/audit": "listAuditEvents",
        "GET /healthz": "healthz",
        "GET /readyz": "readyz",
    }
    assert schema["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "sch_<key id>_<secret>",
        "description": "A tenant's API key, or the admin token.",
    }
    for path, operations in schema["paths"].items():
        for operation in operations.values():
            expected = None if path in ("/healthz", "/readyz") else [{"bearer": []}]
            assert operation.get("security") == expected, path


def test_job_target_is_a_discriminated_union() -> None:
    components = json.loads(DEFAULT_PATH.read_text())["components"]["schemas"]
    for model in ("JobPut", "Job"):
        target = components[model]["properties"]["target"]
        assert target["discriminator"] == {
            "propertyName": "type",
            "mapping": {
                "http": "#/components/schemas/HttpTarget",
                "python": "#/components/schemas/PythonTarget",
                "noop": "#/components/schemas/NoopTarget",
            },
        }
    assert {"type", "url", "method", "headers", "body"} == set(components["HttpTarget"]["properties"])
    assert components["HttpTarget"]["properties"]["body"]["enum"] == ["payload", "envelope"]
    assert components["HttpTarget"]["properties"]["url"]["format"] == "uri"
    assert components["PythonTarget"]["properties"]["handler"]["maxLength"] == 200
    assert components["JobPut"]["properties"]["max_attempts"]["maximum"] == 100
