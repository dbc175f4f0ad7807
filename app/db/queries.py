"""Loads the named SQL blocks of app/db/*.sql once and runs them by name.

Each repository module's statements are in the .sql file beside it (app/db/runs.py's in
app/db/runs.sql), as named blocks: `-- name: <stem>`, a comment saying why, then the SQL; nothing
else builds SQL. A name is unique across the files, so a statement is run by its name alone, and a
module runs only the blocks of its own file (tests/unit/test_query_files.py). The tables, functions
and triggers they run against are app/db/schema/.

Blocks are written with named binds (`:tenant_id`), turned into asyncpg's positional `$n` form at
import, so a call passes keywords and the hot path does no string work. A bind is what SQLAlchemy's
text() takes for one (tests/unit/test_query_binds.py compares every block with its compiler, which
a process need not import: a tenth of a second at each start).

A statement that writes job_runs names, under its name, the triggers its writes may fire
(`-- fires: ...`, from app/db/schema/: the run_queue triggers keep the queue, job_runs_flow_control
can rewrite due_at and held behind the statement, job_runs_record_callback writes the outbox,
job_runs_failure_streak may pause the job). tests/unit/test_query_fires.py checks each line;
`python -m tests.query_triggers` rewrites them all from the schema.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import asyncpg

_BLOCK = re.compile(r"^-- name: (\w+)\n", re.MULTILINE)
# `:name`, not `::type` (a cast), `\:` or a colon inside a word (text()'s rule).
_BIND = re.compile(r"(?<![:\w\\]):(\w+)(?![:\w])")


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


def positional(sql: str) -> tuple[str, tuple[str, ...]]:
    """`sql` with each named bind as `$n` (a name used twice keeps its number), and the names in
    the order of their numbers."""
    params: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in params:
            params.append(name)
        return f"${params.index(name) + 1}"

    return _BIND.sub(number, sql).replace("\\:", ":"), tuple(params)


def parse(source: str) -> dict[str, Query]:
    parts = _BLOCK.split(source)
    queries: dict[str, Query] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        sql = "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("--")).strip()
        if name in queries:
            raise ValueError(f"duplicate query name {name}")
        queries[name] = Query(name, *positional(sql.rstrip(";")))
    return queries


def merge(by_file: dict[str, dict[str, Query]]) -> dict[str, Query]:
    """Every file's blocks by name; a name in two files is an error."""
    queries: dict[str, Query] = {}
    file_of: dict[str, str] = {}
    for file, blocks in by_file.items():
        for name, query in blocks.items():
            if name in queries:
                raise ValueError(f"duplicate query name {name} in {file_of[name]} and {file}")
            queries[name] = query
            file_of[name] = file
    return queries


SQL_FILES = tuple(sorted(Path(__file__).resolve().parent.glob("*.sql")))
# The blocks of each file, by its stem: QUERIES_BY_FILE["runs"] is app/db/runs.sql's.
QUERIES_BY_FILE = {path.stem: parse(path.read_text()) for path in SQL_FILES}
QUERIES = merge({f"{stem}.sql": blocks for stem, blocks in QUERIES_BY_FILE.items()})

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
