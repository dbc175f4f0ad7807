"""Rules of the scheduler: submission, idempotency, cron next-fire, auth, targets.

No FastAPI and no NATS here."""
