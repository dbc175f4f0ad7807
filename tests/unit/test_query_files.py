"""Each repository module of app/db runs only the named blocks of the .sql file beside it, and that file
holds only blocks the module runs: a statement is found next to its caller. Read from the source: the
block names passed to q.fetch, q.fetchrow, q.fetchval and q.execute (a literal, a conditional of
literals, or a module-level table of them)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from app.db.queries import QUERIES, QUERIES_BY_FILE, merge, parse

DB = Path(__file__).resolve().parents[2] / "app" / "db"
RUNNERS = {"fetch", "fetchrow", "fetchval", "execute"}
# catalog.py runs every block of catalog.sql in turn (snapshot), none by its name.
READ_WHOLE = {"catalog"}


def run_names(source: str) -> list[tuple[int, set[str]]]:
    """(line, the block names it may run) of each call of a runner of app.db.queries."""
    tree = ast.parse(source)
    module_values = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    calls = []
    for node in ast.walk(tree):
        func = node.func if isinstance(node, ast.Call) else None
        if not (
            isinstance(func, ast.Attribute)
            and func.attr in RUNNERS
            and isinstance(func.value, ast.Name)
            and func.value.id == "q"
        ):
            continue
        assert isinstance(node, ast.Call)
        name_arg = node.args[1]
        sources = [name_arg] + [
            module_values[n.id]
            for n in ast.walk(name_arg)
            if isinstance(n, ast.Name) and n.id in module_values
        ]
        names = {
            n.value
            for expression in sources
            for n in ast.walk(expression)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
        calls.append((node.lineno, names))
    return calls


def test_each_module_runs_only_the_blocks_of_its_own_file() -> None:
    file_of = {name: stem for stem, blocks in QUERIES_BY_FILE.items() for name in blocks}
    wrong = []
    for path in sorted(DB.glob("*.py")):
        own = QUERIES_BY_FILE.get(path.stem, {})
        for line, names in run_names(path.read_text()):
            if not names:
                wrong.append(f"app/db/{path.name}:{line} runs a block whose name is not read from the source")
            for name in sorted(names - own.keys()):
                where = f"{file_of[name]}.sql" if name in file_of else "no file"
                wrong.append(f"app/db/{path.name}:{line} runs {name}, which is in {where}")
    assert not wrong, "\n".join(wrong)


def test_each_file_holds_only_blocks_its_module_runs() -> None:
    wrong = []
    for stem, blocks in QUERIES_BY_FILE.items():
        module = DB / f"{stem}.py"
        if stem in READ_WHOLE:
            continue
        if not module.exists():
            wrong.append(f"app/db/{stem}.sql has no module app/db/{stem}.py beside it")
            continue
        run = set().union(*(names for _, names in run_names(module.read_text())))
        wrong += [
            f"app/db/{stem}.sql: {name} is not run by app/db/{stem}.py"
            for name in sorted(blocks.keys() - run)
        ]
    assert not wrong, "\n".join(wrong)


def test_the_names_a_call_may_run_are_read() -> None:
    source = """
TABLE = {Kind.A: "from_table_a", Kind.B: "from_table_b"}
async def f(conn, x, kind):
    await q.fetch(conn, "literal", a=1)
    await q.execute(
        conn,
        "one" if x else "other",
    )
    await q.fetchrow(conn, TABLE[kind])
    await conn.fetch("SELECT 1")
"""
    assert run_names(source) == [
        (4, {"literal"}),
        (5, {"one", "other"}),
        (9, {"from_table_a", "from_table_b"}),
    ]


def test_a_name_in_two_files_is_refused() -> None:
    a, b = parse("-- name: same\nSELECT 1;\n"), parse("-- name: same\nSELECT 2;\n")
    with pytest.raises(ValueError, match=r"same in a\.sql and b\.sql"):
        merge({"a.sql": a, "b.sql": b})


def test_every_file_is_loaded() -> None:
    assert set(QUERIES_BY_FILE) == {p.stem for p in DB.glob("*.sql")}
    assert len(QUERIES) == sum(len(blocks) for blocks in QUERIES_BY_FILE.values())
