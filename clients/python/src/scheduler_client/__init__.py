"""The scheduler's Python client: `Client` and `AsyncClient` (retries with one Idempotency-Key,
listings across pages, `wait`), `ApiError` for the API's problems, `verify_webhook` for the calls
its workers make, and the `schedctl` command line (scheduler_client.cli).

`scheduler_client.generated` holds the typed models and endpoints generated from the API's
openapi.json (clients/python/generate.py); the rest is written by hand on top of it."""

from scheduler_client.async_client import AsyncClient
from scheduler_client.client import Client
from scheduler_client.errors import ApiError
from scheduler_client.generated.models import ApiKey, Group, Job, KeyCreated, Run, RunStatus
from scheduler_client.retries import RetryPolicy
from scheduler_client.webhooks import WebhookVerificationError, verify_webhook

__all__ = [
    "ApiError",
    "ApiKey",
    "AsyncClient",
    "Client",
    "Group",
    "Job",
    "KeyCreated",
    "RetryPolicy",
    "Run",
    "RunStatus",
    "WebhookVerificationError",
    "verify_webhook",
]
