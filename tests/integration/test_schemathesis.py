"""Schemathesis against the running app over real HTTP: the schema is the one the app serves at
/openapi.json, every operation gets generated valid and invalid requests (bounded, derandomized so a
failure repeats), authenticated as the tenant that owns the paths (the admin token for /tenants),
and every response is checked: never a 5xx, and status code, content type and body as documented.
The schema must also declare what the server enforces: an operation whose every valid (positive)
request the server refuses as invalid is what schemathesis reports as "schema validation mismatch".

test_api_fuzz.py hunts 500s with the admin token over the committed openapi.json; this one holds
the app to its own contract."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httpx
import hypothesis
import schemathesis
from hypothesis import HealthCheck, Phase
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.failures import FailureGroup

from tests.support import ADMIN_TOKEN, bearer

MAX_EXAMPLES = 25  # per operation and generation mode
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def fuzz(
    base_url: str, tenant_key: str, pinned: dict[str, str]
) -> tuple[list[str], int, dict[str, Counter[int]]]:
    """Blocking (schemathesis sends with requests), so it runs in a thread while the app serves on
    the test's event loop. Returns the failures, one paragraph each, how many requests were sent,
    and the status codes that answered each operation's positive (schema-valid) requests."""
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    failures: list[str] = []
    sent = 0
    positive: dict[str, Counter[int]] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        # Admin for the tenant surface (creating, reading and limiting tenants), else the tenant's
        # own key: requests reach the handlers instead of stopping at 401/404.
        auth = bearer(ADMIN_TOKEN if operation.path in ("/tenants", "/tenants/{tenant_id}") else tenant_key)
        path_parameters = {k: v for k, v in pinned.items() if "{" + k + "}" in operation.path} or None
        for mode in schemathesis.GenerationMode:
            strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)
            statuses = (
                positive.setdefault(operation.label, Counter()) if mode.value == "positive" else Counter()
            )
            label = f"[{mode.value}] {operation.label}"
            try:
                sent += _send_all(strategy, base_url, auth, failures, label, statuses)
            except hypothesis.errors.Unsatisfiable:  # nothing to make invalid (e.g. GET /healthz)
                assert mode is schemathesis.GenerationMode.NEGATIVE, operation.label
    return failures, sent, positive


def _send_all(
    strategy: Any,
    base_url: str,
    auth: dict[str, str],
    failures: list[str],
    label: str,
    statuses: Counter[int],
) -> int:
    sent = 0

    @hypothesis.settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @hypothesis.given(case=strategy)
    def send(case: schemathesis.Case) -> None:
        nonlocal sent
        sent += 1
        try:
            response = case.call(base_url=base_url, headers=auth, timeout=30)
            statuses[response.status_code] += 1
            case.validate_response(response, checks=CHECKS)
        # Collect every failure, not just the first. Several failures of one response come as a
        # FailureGroup, a BaseExceptionGroup: `except Exception` would let it through.
        except (Exception, FailureGroup) as exc:
            failures.append(f"{label}: {_describe(exc)}\n    {case.as_curl_command()}")

    send()
    return sent


def validation_mismatch(statuses: Counter[int]) -> bool:
    """Schemathesis's "schema validation mismatch" warning: every positive request refused, and a
    tenth or more of the refusals for the data (not auth, absence, conflict or rate limits)."""
    if not statuses or any(code < 400 for code in statuses):
        return False
    data = sum(n for code, n in statuses.items() if code < 500 and code not in (401, 403, 404, 409, 429))
    refused = data + statuses[404]
    return refused > 0 and data / refused >= 0.1


def _describe(exc: BaseException) -> str:
    found = exc.exceptions if isinstance(exc, FailureGroup) else [exc]
    return " | ".join(getattr(f, "title", None) or str(f).strip().splitlines()[0] for f in found)


async def test_every_operation_honours_its_contract(api: httpx.AsyncClient, tenant: dict) -> None:
    auth = tenant["auth"]
    # The job the schema's examples name, so its example requests can succeed as they are.
    r = await api.put("/tenants/acme/jobs/send-report", json={"target": {"type": "noop"}}, headers=auth)
    assert r.status_code == 201, r.text
    run = (await api.post("/tenants/acme/runs", json={"job": "hello"}, headers=auth)).json()
    # Job paths pinned to another name: fuzzing DELETE would otherwise delete `send-report`.
    pinned = {"tenant_id": "acme", "run_id": run["id"], "name": "fuzzed"}
    failures, sent, positive = await asyncio.to_thread(
        fuzz, str(api.base_url).rstrip("/"), tenant["api_key"], pinned
    )
    assert not failures, f"{len(failures)} of {sent} requests broke the contract:\n" + "\n".join(failures)
    assert sent > 200
    # A backfill's range must lie within days of now: a window that moves with the clock, which no
    # schema can declare, so its schema-valid requests are mostly refused (tests/integration/test_backfill.py
    # covers it).
    mismatched = {
        label: dict(statuses)
        for label, statuses in positive.items()
        if validation_mismatch(statuses) and label != "POST /tenants/{tenant_id}/jobs/{name}/backfill"
    }
    assert not mismatched, f"schema validation mismatch (positive requests' statuses): {mismatched}"
    for label in ("PUT /tenants/{tenant_id}/jobs/{name}", "POST /tenants/{tenant_id}/runs"):
        assert any(200 <= code < 300 for code in positive[label]), (label, positive[label])
    assert any(200 <= c < 300 for c in positive["POST /tenants/{tenant_id}/runs/batch"]), positive
