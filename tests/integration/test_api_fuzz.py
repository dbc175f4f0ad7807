"""Never a 500: schemathesis generates valid and invalid requests for every operation in openapi.json
and sends them to the real app (real Postgres) with the admin token and tenant paths pinned to an
existing tenant, so requests reach the handlers instead of stopping at auth. Derandomized, so a
failure repeats."""

from __future__ import annotations

import asyncio
import json

import httpx
import hypothesis
import schemathesis
from hypothesis import HealthCheck, Phase

from app.openapi import DEFAULT_PATH
from tests.support import ADMIN_TOKEN, bearer

EXAMPLES_PER_OPERATION = 30


def fuzz(base_url: str, auth: dict[str, str]) -> list[str]:
    """Runs in a thread (requests is blocking; the server lives on the test's event loop)."""
    schema = schemathesis.openapi.from_dict(json.loads(DEFAULT_PATH.read_text()))
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        own = {"tenant_id": "acme"} if "{tenant_id}" in operation.path else None
        for mode in schemathesis.GenerationMode:

            @hypothesis.settings(
                max_examples=EXAMPLES_PER_OPERATION,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @hypothesis.given(case=operation.as_strategy(generation_mode=mode, path_parameters=own))
            def send(case: schemathesis.Case) -> None:
                response = case.call(base_url=base_url, headers=auth, timeout=30)
                if response.status_code >= 500:
                    failures.append(
                        f"{response.status_code} {case.as_curl_command()}\n    {response.text[:300]}"
                    )
                elif response.status_code != 204:
                    [content_type] = response.headers["content-type"]  # schemathesis keeps a list per header
                    expected = (
                        "application/problem+json" if response.status_code >= 400 else "application/json"
                    )
                    assert content_type.startswith(expected), case.as_curl_command()

            try:
                send()
            except hypothesis.errors.Unsatisfiable:  # nothing to make invalid (e.g. /healthz)
                assert mode is schemathesis.GenerationMode.NEGATIVE, operation.label
    return failures


async def test_no_generated_request_gets_a_500(api: httpx.AsyncClient, tenant: dict) -> None:
    failures = await asyncio.to_thread(fuzz, str(api.base_url), bearer(ADMIN_TOKEN))
    assert not failures, "\n".join(failures)
