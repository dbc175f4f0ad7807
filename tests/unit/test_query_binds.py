"""app.db.queries turns named binds into asyncpg's `$n` as SQLAlchemy's text() compiler does, for
every block of app/db/*.sql and for the cases the blocks do not show (a repeated name, an escaped
colon, casts): the same SQL and the same order of names."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.dialects.postgresql import asyncpg as asyncpg_dialect

from app.db.queries import QUERIES, positional

DIALECT = asyncpg_dialect.dialect()  # type: ignore[no-untyped-call]


def compiled(sql: str) -> tuple[str, tuple[str, ...]]:
    c = text(sql).compile(dialect=DIALECT)
    return c.string, tuple(c.positiontup or ())


def test_every_block_is_what_sqlalchemy_would_make_of_it() -> None:
    assert len(QUERIES) > 50
    for query in QUERIES.values():
        # Back from $n to :name: the block's text as written, bar comments.
        named = query.sql
        for i, name in reversed(list(enumerate(query.params, 1))):
            named = named.replace(f"${i}", f":{name}")
        assert (query.sql, query.params) == compiled(named), query.name


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT :a::uuid[], CAST(:b AS int), x::text FROM t WHERE y = :a",
        "SELECT '12:30'::time, a:b, :c_1 FROM t",
        "SELECT \\:not_a_bind, :real",
        "SELECT :x,:y,(:z)",
    ],
)
def test_edge_cases_match_sqlalchemy(sql: str) -> None:
    assert positional(sql) == compiled(sql)
