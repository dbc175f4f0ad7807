"""Which triggers of job_runs each named statement (app/db/*.sql) fires, read from the SQL text alone.

A statement's own writes to job_runs (INSERT, UPDATE, DELETE, TRUNCATE, in any CTE) fire the
triggers of their event, as app/db/schema/ defines them; an UPDATE fires a trigger `OF columns` only
if it sets one of them, and a row trigger whose WHEN requires a column to change (`OLD.c <> NEW.c`,
`NEW.c IS DISTINCT FROM OLD.c`, joined by AND) only if it sets that column. A row trigger is listed
when it may fire: its WHEN decides row by row. What a trigger's own statements fire in turn is the
trigger's business (app/db/schema/), not the statement's.

Run as `python -m tests.query_triggers` to rewrite every block's `-- fires:` line, in every file, from
the schema."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from app.db.catalog import normalise_sql
from app.db.queries import SQL_FILES

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "app" / "db" / "schema"
TABLE = "job_runs"

_BLOCK = re.compile(r"^-- name: (\w+)\n", re.MULTILINE)
_TRIGGER = re.compile(
    r"CREATE\s+TRIGGER\s+(?P<name>\w+)\s+(?:BEFORE|AFTER|INSTEAD\s+OF)\s+(?P<events>.+?)\s+ON\s+(?P<table>\w+)\b"
    r"(?P<rest>.*?);",
    re.IGNORECASE | re.DOTALL,
)
_WRITE = re.compile(
    rf"\b(?:(?P<insert>INSERT\s+INTO)|(?P<update>UPDATE)|(?P<delete>DELETE\s+FROM)|(?P<truncate>TRUNCATE))"
    rf"\s+(?:ONLY\s+)?{TABLE}\b",
    re.IGNORECASE,
)
_FIRES = re.compile(r"^-- fires: (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Trigger:
    name: str
    events: frozenset[str]  # insert, update, delete, truncate
    update_of: frozenset[str]  # UPDATE OF these columns only (empty: any update)
    must_change: frozenset[str]  # columns its WHEN requires to change
    new_in: tuple[tuple[str, frozenset[str]], ...]  # (column, values) its WHEN requires NEW.column among


def _top_level_and(expression: str) -> list[str] | None:
    """The conjuncts of `expression` when it is an AND of terms (outer parentheses dropped), None when
    an OR sits at its top level."""
    text = expression.strip()
    while text.startswith("(") and _closing(text, 0) == len(text) - 1:
        text = text[1:-1].strip()
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and re.match(r"\s(AND|OR)\s", text[i : i + 5], re.IGNORECASE):
            if text[i + 1 : i + 3].upper() == "OR":
                return None
            parts.append(text[start:i])
            start = i + 5
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _closing(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return -1


def schema_triggers(schema_dir: Path = SCHEMA) -> dict[str, Trigger]:
    """The triggers on job_runs that app/db/schema/ creates."""
    found: dict[str, Trigger] = {}
    for path in sorted(schema_dir.glob("*.sql")):
        for m in _TRIGGER.finditer(normalise_sql(path.read_text())):
            if m["table"].lower() != TABLE:
                continue
            events, update_of = set(), set()
            for event in re.split(r"\s+OR\s+", m["events"].strip(), flags=re.IGNORECASE):
                kind, _, columns = event.strip().partition(" ")
                events.add(kind.lower())
                if kind.upper() == "UPDATE" and columns.strip().upper().startswith("OF"):
                    update_of |= {c.strip().lower() for c in columns.strip()[2:].split(",")}
            must_change: set[str] = set()
            new_in: list[tuple[str, frozenset[str]]] = []
            when = re.search(r"\bWHEN\s*\(", m["rest"], re.IGNORECASE)
            if when:
                open_at = when.end() - 1
                conjuncts = _top_level_and(m["rest"][open_at : _closing(m["rest"], open_at) + 1]) or []
                for term in conjuncts:
                    changed = re.fullmatch(
                        r"\(?\s*(?:OLD\.(\w+)\s*<>\s*NEW\.\1|NEW\.(\w+)\s+IS\s+DISTINCT\s+FROM\s+OLD\.\2)\s*\)?",
                        term,
                        re.IGNORECASE,
                    )
                    if changed:
                        must_change.add((changed[1] or changed[2]).lower())
                    among = re.fullmatch(r"\(?\s*NEW\.(\w+)\s+IN\s*\(([^()]*)\)\s*\)?", term, re.IGNORECASE)
                    if among:
                        new_in.append((among[1].lower(), frozenset(re.findall(r"'([^']*)'", among[2]))))
            found[m["name"]] = Trigger(
                m["name"], frozenset(events), frozenset(update_of), frozenset(must_change), tuple(new_in)
            )
    return found


def _set_columns(sql: str, at: int) -> dict[str, str]:
    """The columns an UPDATE starting at `at` assigns, each with its expression ('' in a row
    assignment): its SET list up to FROM, WHERE or RETURNING."""
    set_at = re.compile(r"\bSET\b", re.IGNORECASE).search(sql, at)
    assert set_at, f"an UPDATE without SET at {sql[at : at + 60]!r}"
    columns: dict[str, str] = {}
    depth, item_start = 0, set_at.end()
    i = set_at.end()
    while i < len(sql):
        ch = sql[i]
        if ch == "'":
            i = sql.index("'", i + 1) + 1
            continue
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            break
        ended = depth == 0 and re.match(r"\s(FROM|WHERE|RETURNING)\b", sql[i:], re.IGNORECASE)
        if depth == 0 and (ch == "," or ended):
            columns |= _assigned(sql[item_start:i])
            item_start = i + 1
            if ended:
                break
        i += 1
    else:
        columns |= _assigned(sql[item_start:])
    return columns


def _assigned(item: str) -> dict[str, str]:
    target, _, value = item.partition("=")
    names = [c.strip().split(".")[-1].lower() for c in target.strip().strip("()").split(",") if c.strip()]
    return {n: value.strip() if len(names) == 1 else "" for n in names}


def _values(expression: str) -> set[str] | None:
    """The string values an assigned expression can take when it is a literal or a CASE of literals;
    None when it can be anything."""
    if re.fullmatch(r"'[^']*'", expression):
        return {expression[1:-1]}
    case = re.fullmatch(r"CASE\s+(.*)\s+END", expression, re.IGNORECASE | re.DOTALL)
    if not case:
        return None
    results = re.findall(r"\b(?:THEN|ELSE)\s+('[^']*'|\S+)", case[1], re.IGNORECASE)
    if not results or not all(r.startswith("'") for r in results):
        return None
    return {r[1:-1] for r in results}


def expected_fires(sql: str, triggers: dict[str, Trigger]) -> set[str]:
    """The triggers on job_runs a statement's own writes may fire."""
    sql = normalise_sql(sql)
    fires: set[str] = set()
    for write in _WRITE.finditer(sql):
        event = next(k for k in ("insert", "update", "delete", "truncate") if write[k])
        assigned = _set_columns(sql, write.start()) if event == "update" else {}
        for t in triggers.values():
            if event not in t.events:
                continue
            if event == "update" and t.update_of and not (t.update_of & assigned.keys()):
                continue
            if event == "update" and not t.must_change <= assigned.keys():
                continue
            if event == "update" and any(
                column in assigned and (v := _values(assigned[column])) is not None and not v & allowed
                for column, allowed in t.new_in
            ):
                continue
            fires.add(t.name)
    return fires


def blocks(source: str) -> dict[str, str]:
    parts = _BLOCK.split(source)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def declared_fires(block: str) -> set[str] | None:
    declared = _FIRES.findall(block)
    if not declared:
        return None
    return {name.strip() for line in declared for name in line.split(",") if name.strip()}


def rewrite(source: str, triggers: dict[str, Trigger]) -> str:
    """A file of named blocks with each block's `-- fires:` line (right under its name) made what it
    fires."""
    parts = _BLOCK.split(source)
    out = [parts[0]]
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        body = re.sub(r"^-- fires: .*\n", "", body, flags=re.MULTILINE)
        fires = expected_fires(body, triggers)
        line = f"-- fires: {', '.join(sorted(fires))}\n" if fires else ""
        out.append(f"-- name: {name}\n{line}{body}")
    return "".join(out)


if __name__ == "__main__":
    triggers = schema_triggers()
    for path in SQL_FILES:
        text = path.read_text()
        if (rewritten := rewrite(text, triggers)) != text:
            path.write_text(rewritten)
    sys.exit(0)
