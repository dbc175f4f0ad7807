"""Postgres: the pool, the named SQL blocks (app/db/*.sql, each beside
the module that runs it) and the repositories that run them.

Nothing outside this package builds a statement."""
