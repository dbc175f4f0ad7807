"""Scheduler: a multi-tenant distributed job scheduler. Postgres is the truth; NATS JetStream carries work."""
