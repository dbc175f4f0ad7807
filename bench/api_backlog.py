"""The `api` backlog shape: a burst submitted through the service's front door. Tenants and their
noop job are created with the API; each tenant's runs are POSTed to /tenants/{t}/runs/batch in
batches of up to 1,000, one tenant after the other (each tenant's burst contiguous, as a tenant's
batches arrive), each request with a W3C trace context of its own (`traceparent`), every run due at
one instant set far enough ahead for the submission to finish first."""

from __future__ import annotations

import secrets
import time
from datetime import datetime

import httpx

from bench.scenarios._common import api_tenant
from bench.workload import tenant_ids

BATCH = 1000


def traceparent() -> str:
    """A sampled W3C trace context with fresh trace and parent ids."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


async def create_tenants(
    client: httpx.AsyncClient, tenants: int, target: dict[str, str]
) -> list[tuple[str, dict[str, str]]]:
    return [(t, await api_tenant(client, t, target)) for t in tenant_ids(tenants)]


async def submit(
    client: httpx.AsyncClient, auths: list[tuple[str, dict[str, str]]], n: int, due_at: datetime
) -> float:
    """N runs of `noop`, due at `due_at`, split evenly over the tenants in contiguous bursts; returns
    the perf_counter() at which the last batch was answered. Raises on any answer but 201."""
    when = due_at.isoformat()
    per_tenant = -(-n // len(auths))
    left = n
    for tenant, auth in auths:
        mine = min(per_tenant, left)
        left -= mine
        for i in range(0, mine, BATCH):
            runs = [{"job": "noop", "scheduled_at": when}] * min(BATCH, mine - i)
            r = await client.post(
                f"/tenants/{tenant}/runs/batch",
                json={"runs": runs},
                headers=auth | {"traceparent": traceparent()},
            )
            if r.status_code != 201:
                raise RuntimeError(f"POST /tenants/{tenant}/runs/batch: {r.status_code} {r.text[:300]}")
    return time.perf_counter()
