"""Schemathesis against the running app over real HTTP: the schema is the one the app serves at
/openapi.json, every operation gets generated valid and invalid requests (bounded, derandomized so a
failure repeats), authenticated as the tenant that owns the paths (the admin token for /tenants),
and every response is checked: never a 5xx, and status code, content type and body as documented.

test_api_fuzz.py hunts 500s with the admin token over the committed openapi.json; this one holds
the app to its own contract."""

from __future__ import annotations

import asyncio
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


def fuzz(base_url: str, tenant_key: str, pinned: dict[str, str]) -> tuple[list[str], int]:
    """Blocking (schemathesis sends with requests), so it runs in a thread while the app serves on
    the test's event loop. Returns the failures, one paragraph each, and how many requests were sent."""
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    failures: list[str] = []
    sent = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        # Admin for the tenant surface, else the tenant's own key: requests reach the handlers
        # instead of stopping at 401/404.
        auth = bearer(ADMIN_TOKEN if operation.path == "/tenants" else tenant_key)
        path_parameters = {k: v for k, v in pinned.items() if "{" + k + "}" in operation.path} or None
        for mode in schemathesis.GenerationMode:
            strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)
            try:
                sent += _send_all(strategy, base_url, auth, failures, f"[{mode.value}] {operation.label}")
            except hypothesis.errors.Unsatisfiable:  # nothing to make invalid (e.g. GET /healthz)
                assert mode is schemathesis.GenerationMode.NEGATIVE, operation.label
    return failures, sent


def _send_all(strategy: Any, base_url: str, auth: dict[str, str], failures: list[str], label: str) -> int:
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
            case.call_and_validate(base_url=base_url, headers=auth, checks=CHECKS, timeout=30)
        # Collect every failure, not just the first. Several failures of one response come as a
        # FailureGroup, a BaseExceptionGroup: `except Exception` would let it through.
        except (Exception, FailureGroup) as exc:
            failures.append(f"{label}: {_describe(exc)}\n    {case.as_curl_command()}")

    send()
    return sent


def _describe(exc: BaseException) -> str:
    found = exc.exceptions if isinstance(exc, FailureGroup) else [exc]
    return " | ".join(getattr(f, "title", None) or str(f).strip().splitlines()[0] for f in found)


async def test_every_operation_honours_its_contract(api: httpx.AsyncClient, tenant: dict) -> None:
    auth = tenant["auth"]
    run = (await api.post("/tenants/acme/runs", json={"job": "hello"}, headers=auth)).json()
    pinned = {"tenant_id": "acme", "run_id": run["id"]}
    failures, sent = await asyncio.to_thread(fuzz, str(api.base_url).rstrip("/"), tenant["api_key"], pinned)
    assert not failures, f"{len(failures)} of {sent} requests broke the contract:\n" + "\n".join(failures)
    assert sent > 200
