"""The database's shape read from Postgres's catalogs, one entry per object, for comparing two databases.

`app/db/schema/` is the contract: the current text of every table, index, function and trigger the
migrations make. `snapshot()` reads what a database holds (the `public` schema, without alembic's
table) as `{object: normalised definition}`; `differences()` names every object that is missing on
one side or defined differently. Definitions come from Postgres's own deparsers (`pg_get_indexdef`,
`pg_get_constraintdef`, `pg_get_triggerdef`, `pg_get_expr`), so two databases built by different
statements compare equal exactly when the server holds the same thing; a function's body is
compared without its comments and with its whitespace collapsed, so the schema's copy may carry the
rationale a migration kept in Python comments."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from app.db.queries import QUERIES_BY_FILE

SCHEMA_DIR = Path(__file__).resolve().parent / "schema"
IGNORED_TABLES = ("alembic_version",)

# Each block yields (kind, name, definition) rows; a name is unique within its kind.
_QUERIES = QUERIES_BY_FILE["catalog"]

# A dollar-quoted string, a quoted literal or identifier, or a comment: the tokens a body's
# normalisation must not look inside (a "--" in a string is no comment).
_TOKEN = re.compile(
    r"""(?P<dollar>\$(?P<tag>[A-Za-z_]\w*)?\$.*?\$(?P=tag)?\$)
      | (?P<quoted>'(?:[^']|'')*'|"(?:[^"]|"")*")
      | (?P<line>--[^\n]*)
      | (?P<block>/\*.*?\*/)""",
    re.VERBOSE | re.DOTALL,
)


def normalise_sql(source: str) -> str:
    """SQL without its comments, each whitespace run outside literals made one space."""
    out: list[str] = []
    code = ""  # the code since the last literal, comments already blanked
    pos = 0
    for match in _TOKEN.finditer(source):
        code += source[pos : match.start()]
        if match.group("dollar") or match.group("quoted"):
            out += [re.sub(r"\s+", " ", code), match.group(0)]
            code = ""
        else:
            code += " "
        pos = match.end()
    out.append(re.sub(r"\s+", " ", code + source[pos:]))
    return "".join(out).strip()


@dataclass(frozen=True)
class Difference:
    key: str  # "function scheduler_run_hold(boolean, ...)"
    migrated: str | None  # None: no such object at the migrations' head
    schema: str | None  # None: no such object in app/db/schema/

    def describe(self) -> str:
        kind, _, name = self.key.partition(" ")
        base = name.split("(")[0].split(".")[-1 if kind in ("trigger", "policy") else 0]
        file = defining_file(kind, name) or "<the file of its topic>"
        if self.schema is None:
            what = f"{self.key}: made by the migrations, missing from app/db/schema/"
        elif self.migrated is None:
            what = f"{self.key}: in app/db/schema/, not made by the migrations"
        else:
            what = (
                f"{self.key}: defined differently\n  migrations: {self.migrated}\n  schema/:    {self.schema}"
            )
        dump = f"python -m app.db.schema_dump --server URL {base}"
        return f"{what}\n  -> update app/db/schema/{file} (`{dump}` prints its text at head)"


_DEFINED_BY = {
    "table": r"TABLE\s+(?:ONLY\s+)?(?:IF NOT EXISTS\s+)?{}\b",
    "function": r"(?:FUNCTION|PROCEDURE|AGGREGATE)\s+{}\s*\(",
    "trigger": r"TRIGGER\s+{}\b",
    "index": r"INDEX\s+(?:IF NOT EXISTS\s+)?{}\b",
    "type": r"(?:TYPE|DOMAIN)\s+{}\b",
    "view": r"VIEW\s+{}\b",
    "sequence": r"SEQUENCE\s+{}\b",
    "policy": r"POLICY\s+{}\b",
    "extension": r"EXTENSION\s+(?:IF NOT EXISTS\s+)?{}\b",
}


def defining_file(kind: str, name: str) -> str | None:
    """The schema file whose CREATE or ALTER statement names the object (a column or a constraint:
    its table), if one does."""
    base = name.split("(")[0]
    if kind in ("column", "constraint"):
        kind, base = "table", base.split(".")[0]
    elif kind in ("trigger", "policy"):
        base = base.split(".")[-1]
    pattern = re.compile(
        r"\b(?:CREATE|ALTER)\b[^;]*?" + _DEFINED_BY.get(kind, "{}").format(re.escape(base)), re.I
    )
    for path in schema_files():
        if pattern.search(path.read_text()):
            return path.name
    return None


async def snapshot(conn: asyncpg.Connection) -> dict[str, str]:
    """{"kind name": normalised definition} of every object in the public schema."""
    objects: dict[str, str] = {}
    for kind, query in _QUERIES.items():
        values = {"ignored": list(IGNORED_TABLES)} if query.params else {}
        for row in await conn.fetch(query.sql, *query.args(values)):
            definition = row[2] or ""
            if kind == "function":
                header, _, body = definition.partition("\nbody ")
                definition = f"{header} body {normalise_sql(body)}"
            objects[f"{row[0]} {row[1]}"] = definition
    return objects


def differences(migrated: dict[str, str], schema: dict[str, str]) -> list[Difference]:
    return [
        Difference(key, migrated.get(key), schema.get(key))
        for key in sorted(migrated.keys() | schema.keys())
        if migrated.get(key) != schema.get(key)
    ]


def schema_files() -> list[Path]:
    return sorted(SCHEMA_DIR.glob("*.sql"))


async def load_schema(conn: asyncpg.Connection) -> None:
    """Runs app/db/schema/*.sql in name order, each file as one script (simple query protocol)."""
    for path in schema_files():
        try:
            await conn.execute(path.read_text())
        except asyncpg.PostgresError as e:
            raise RuntimeError(f"app/db/schema/{path.name}: {e}") from e
