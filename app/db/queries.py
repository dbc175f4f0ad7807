"""Loads sql/queries.sql once and runs its named blocks.

Blocks are written with named binds (`:tenant_id`); SQLAlchemy's compiler turns each into asyncpg's
positional `$n` form at import, so a call passes keywords and the hot path does no string work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeAlias

import asyncpg
from sqlalchemy import text
from sqlalchemy.dialects.postgresql import asyncpg as asyncpg_dialect

_BLOCK = re.compile(r"^-- name: (\w+)\n", re.MULTILINE)


@dataclass(frozen=True)
class Query:
    name: str
    sql: str
    params: tuple[str, ...]

    def args(self, values: dict[str, Any]) -> list[Any]:
        missing = set(self.params) - values.keys()
        extra = values.keys() - set(self.params)
        if missing or extra:
            raise TypeError(f"query {self.name}: missing {sorted(missing)}, unexpected {sorted(extra)}")
        return [values[p] for p in self.params]


def parse(source: str) -> dict[str, Query]:
    dialect = asyncpg_dialect.dialect()  # type: ignore[no-untyped-call]
    parts = _BLOCK.split(source)
    queries: dict[str, Query] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        sql = "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("--")).strip()
        compiled = text(sql.rstrip(";")).compile(dialect=dialect)
        if name in queries:
            raise ValueError(f"duplicate query name {name}")
        queries[name] = Query(name, compiled.string, tuple(compiled.positiontup or ()))
    return queries


QUERIES = parse(resources.files("app.db").joinpath("sql/queries.sql").read_text())

# A pooled connection proxies a Connection; both run statements the same way.
Conn: TypeAlias = asyncpg.Connection


async def fetch(conn: Conn, name: str, /, **values: Any) -> list[asyncpg.Record]:
    q = QUERIES[name]
    rows: list[asyncpg.Record] = await conn.fetch(q.sql, *q.args(values))
    return rows


async def fetchrow(conn: Conn, name: str, /, **values: Any) -> asyncpg.Record | None:
    q = QUERIES[name]
    return await conn.fetchrow(q.sql, *q.args(values))


async def fetchval(conn: Conn, name: str, /, **values: Any) -> Any:
    q = QUERIES[name]
    return await conn.fetchval(q.sql, *q.args(values))


async def execute(conn: Conn, name: str, /, **values: Any) -> str:
    q = QUERIES[name]
    status: str = await conn.execute(q.sql, *q.args(values))
    return status
