"""Rules of the scheduler: submission, idempotency, cron next-fire, auth, targets. No FastAPI, no NATS here."""
