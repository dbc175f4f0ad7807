"""What Postgres did for a workload, read from its statistics views before and after and diffed:
row versions (pg_stat_user_tables), transactions (pg_stat_database), statements and their WAL
(pg_stat_statements, when the server preloads it), WAL (pg_stat_wal) and index bytes.

Everything but WAL is per database, and every workload here has a database of its own, so those
counts are the workload's alone. pg_stat_wal is cluster-wide: on a server others write to, its
bytes include theirs, and the report says which source a figure came from. pg_stat_statements
gives WAL per database, but only when it is in shared_preload_libraries (a server restart): the
bench detects it and never asks for one."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import asyncpg

# Per leaf table: counters, and how many of its indexes are full or partial (a partial index gets an
# entry only for the versions that match its predicate, so those entries are an upper bound).
TABLES = """
SELECT t.relname, t.n_tup_ins, t.n_tup_upd, t.n_tup_hot_upd, t.n_tup_del,
       count(i.indexrelid) FILTER (WHERE i.indpred IS NULL) AS full_indexes,
       count(i.indexrelid) FILTER (WHERE i.indpred IS NOT NULL) AS partial_indexes,
       COALESCE(sum(pg_relation_size(i.indexrelid)), 0) AS index_bytes
FROM pg_stat_user_tables t LEFT JOIN pg_index i ON i.indrelid = t.relid
GROUP BY t.relid, t.relname, t.n_tup_ins, t.n_tup_upd, t.n_tup_hot_upd, t.n_tup_del
"""
DATABASE = """
SELECT xact_commit + xact_rollback AS xacts,
       (SELECT wal_bytes FROM pg_stat_wal) AS cluster_wal_bytes,
       (SELECT wal_records FROM pg_stat_wal) AS cluster_wal_records
FROM pg_stat_database WHERE datname = current_database()
"""
# Index entries present, counted on every btree leaf page (pageinspect): after - before is what a
# workload added on a fresh database, less what btree removed by itself meanwhile (bottom-up and
# LP_DEAD deletion), so a floor, where the count from row versions above is a ceiling.
LEAF_ITEMS = """
SELECT COALESCE(sum(s.live_items + s.dead_items), 0)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am am ON am.oid = c.relam AND am.amname = 'btree'
JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname NOT IN ('pg_catalog', 'information_schema')
CROSS JOIN LATERAL generate_series(1, CAST(pg_relation_size(c.oid) / 8192 AS int) - 1) AS b
CROSS JOIN LATERAL bt_page_stats(CAST(c.oid AS regclass)::text, b) AS s
WHERE s.type = 'l' AND c.relkind = 'i'
"""
STATEMENTS = """
SELECT COALESCE(sum(calls), 0) AS calls, COALESCE(sum(wal_bytes), 0) AS wal_bytes,
       COALESCE(sum(wal_records), 0) AS wal_records
FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
"""
FIELDS = ("n_tup_ins", "n_tup_upd", "n_tup_hot_upd", "n_tup_del", "index_bytes")


async def statements_available(conn: asyncpg.Connection) -> bool:
    """pg_stat_statements counts only when preloaded; then it is created in this database (it is
    needed per database to be read). Never restarts or reconfigures the server."""
    preload = str(await conn.fetchval("SHOW shared_preload_libraries"))
    if "pg_stat_statements" not in preload:
        return False
    await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    return True


@dataclass
class Snapshot:
    tables: dict[str, dict[str, int]]
    xacts: int
    cluster_wal_bytes: int
    cluster_wal_records: int
    statements: dict[str, int] | None  # None: pg_stat_statements not preloaded
    leaf_items: int | None  # None: pageinspect not available


async def snapshot(url: str) -> Snapshot:
    """The counters of the database `url` names. Backends publish their counters when they go idle
    (at most once a second) and when they exit, so read after the workload's processes stopped."""
    await asyncio.sleep(1.1)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        tables = {r["relname"]: dict(r) for r in await conn.fetch(TABLES)}
        db = await conn.fetchrow(DATABASE)
        stmts = dict(await conn.fetchrow(STATEMENTS)) if await statements_available(conn) else None
        leaf_items = await _leaf_items(conn)
    finally:
        await conn.close()
    return Snapshot(
        tables, db["xacts"], db["cluster_wal_bytes"], db["cluster_wal_records"], stmts, leaf_items
    )


async def _leaf_items(conn: asyncpg.Connection) -> int | None:
    """None where pageinspect is not installable (a managed server, say)."""
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
    except asyncpg.PostgresError:
        return None
    return int(await conn.fetchval(LEAF_ITEMS, timeout=600))


@dataclass
class Work:
    """The difference between two snapshots of one database, per job."""

    jobs: int
    figures: dict[str, float] = field(default_factory=dict)
    by_table: dict[str, dict[str, int]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def per_job(self, name: str) -> float:
        return self.figures[name] / self.jobs if self.jobs else float("nan")


def work(before: Snapshot, after: Snapshot, jobs: int) -> Work:
    w = Work(jobs)
    inserted = updated = hot = deleted = full = partial = index_bytes = 0
    for name, a in after.tables.items():
        b = before.tables.get(name, dict.fromkeys(a, 0))
        d = {k: int(a[k]) - int(b[k]) for k in FIELDS}
        if any(d.values()):
            w.by_table[name] = d
        new_versions = d["n_tup_ins"] + d["n_tup_upd"] - d["n_tup_hot_upd"]  # each gets index entries
        inserted += d["n_tup_ins"]
        updated += d["n_tup_upd"]
        hot += d["n_tup_hot_upd"]
        deleted += d["n_tup_del"]
        full += new_versions * int(a["full_indexes"])
        partial += new_versions * int(a["partial_indexes"])
        index_bytes += d["index_bytes"]
    w.figures = {
        "transactions": after.xacts - before.xacts,
        "rows inserted": inserted,
        "rows updated": updated,
        "of which HOT": hot,
        "rows deleted": deleted,
        "row versions written": inserted + updated,
        "index entries (full indexes)": full,
        "index entries (partial indexes, at most)": partial,
        "index bytes grown": index_bytes,
    }
    if before.leaf_items is not None and after.leaf_items is not None:
        w.figures["index entries (btree leaf items counted)"] = after.leaf_items - before.leaf_items
        w.sources["index entries counted"] = "pageinspect bt_page_stats: a floor (btree deletes dead entries)"
    w.sources = {"transactions": "pg_stat_database", "rows": "pg_stat_user_tables"}
    if before.statements is not None and after.statements is not None:
        for k, label in (("calls", "statements"), ("wal_bytes", "WAL bytes"), ("wal_records", "WAL records")):
            w.figures[label] = float(after.statements[k] - before.statements[k])
        w.sources["statements, WAL"] = "pg_stat_statements (this database only)"
    else:
        w.figures["WAL bytes"] = float(after.cluster_wal_bytes - before.cluster_wal_bytes)
        w.figures["WAL records"] = float(after.cluster_wal_records - before.cluster_wal_records)
        w.sources["statements"] = "not measured: pg_stat_statements is not in shared_preload_libraries"
        w.sources["WAL"] = "pg_stat_wal (cluster-wide: includes whatever else wrote to this server meanwhile)"
    return w


def per_job_rows(works: dict[str, list[Work]]) -> tuple[list[str], list[list[Any]]]:
    """A table: one row per figure, one column per side (the mean over its runs, per job)."""
    sides = list(works)
    names: list[str] = []
    for ws in works.values():
        for w in ws:
            names += [n for n in w.figures if n not in names]
    rows = []
    for name in names:
        row: list[Any] = [name]
        for side in sides:
            vals = [w.per_job(name) for w in works[side] if name in w.figures]
            row.append(sum(vals) / len(vals) if vals else None)
        rows.append(row)
    return ["per job", *sides], rows
