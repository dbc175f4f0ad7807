"""Rules of the scheduler: submission, idempotency, cron next-fire, auth, targets.

No FastAPI, NATS or Redis here (an import-linter contract in pyproject.toml holds it)."""
