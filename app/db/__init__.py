"""Postgres: the pool, the named SQL blocks (sql/queries.sql) and the repositories that run them.

Nothing outside this package builds a statement."""
