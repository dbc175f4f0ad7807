"""Terminal run history written fast, straight into daily partitions (never through the API): a new
day, or a day taking many rows, is a standalone table (detached, its indexes dropped) that takes its
rows from generate_series with no index to maintain and is attached again, which builds its indexes
in bulk (sorted, as CREATE INDEX does) instead of one entry per row; a day taking a few rows takes
them in place (a detach and attach cost more than they save there). The bench's own function, created
in the bench's own database."""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg

from bench.progress import tqdm
from bench.workload import NOOP

# From this many new rows in a day on, rebuilding its indexes beats inserting their entries one by one.
BULK_ROWS = 20_000

GROW_DAY = r"""
CREATE OR REPLACE FUNCTION bench_grow_day(day date, first bigint, n bigint, tenants int, target jsonb,
                                          bulk boolean)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    part text := scheduler_partition_name(day);
    lo   timestamptz := day::timestamp AT TIME ZONE 'UTC';
    hi   timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
    ix   record;
BEGIN
    IF to_regclass(part) IS NULL THEN
        EXECUTE format('CREATE TABLE %I (LIKE job_runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part);
    ELSIF NOT bulk THEN
        NULL;  -- a few rows: into the attached partition, one index entry at a time
    ELSE
        EXECUTE format('ALTER TABLE job_runs DETACH PARTITION %I', part);
        FOR ix IN
            SELECT c.relname, con.conname
            FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid
            WHERE i.indrelid = to_regclass(part)
        LOOP
            IF ix.conname IS NOT NULL THEN
                EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', part, ix.conname);
            ELSE
                EXECUTE format('DROP INDEX %I', ix.relname);
            END IF;
        END LOOP;
    END IF;
    -- Succeeded runs of tenants t000.., spread over the day (7919 is prime: seconds do not repeat in step).
    EXECUTE format($f$
        INSERT INTO %I (id, scheduled_at, tenant_id, job, status, payload, target, max_attempts,
                        backoff_seconds, timeout_seconds, attempt, epoch, due_at, dispatched_at,
                        started_at, finished_at)
        SELECT scheduler_run_id(s.at), s.at, 't' || lpad(CAST(g %% $3 AS text), 3, '0'), 'noop',
               'succeeded', CAST('{}' AS jsonb), $4, 1, 1, 30, 1, 1, s.at, s.at, s.at, s.at
        FROM generate_series($1, $1 + $2 - 1) AS g
        CROSS JOIN LATERAL (SELECT $5 + make_interval(secs => CAST((g * 7919) %% 86400 AS float8))) AS s(at)
    $f$, part) USING first, n, tenants, target, lo;
    IF NOT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(part)) THEN
        EXECUTE format('ALTER TABLE job_runs ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', part, lo, hi);
    END IF;
END
$$;
"""

SAMPLE_IDS = """
SELECT id, tenant_id FROM job_runs TABLESAMPLE SYSTEM (CAST($1 AS float4)) WHERE status = 'succeeded'
ORDER BY random() LIMIT $2
"""

HISTORY_SIZE = """
SELECT count(*) AS partitions, COALESCE(sum(pg_total_relation_size(i.inhrelid)), 0) AS bytes
FROM pg_inherits i WHERE i.inhparent = CAST('job_runs' AS regclass)
"""


async def grow(
    conn: asyncpg.Connection, *, have: int, want: int, days: int, tenants: int, today: datetime
) -> None:
    """Add want - have rows over the `days` whole UTC days before `today`, evenly."""
    await conn.execute(GROW_DAY)
    add = want - have
    with tqdm(total=add, desc=f"history → {want:,} rows", unit="row", unit_scale=True, leave=False) as bar:
        first = have
        for d in range(days):
            n = add // days + (1 if d < add % days else 0)
            if n:
                day = (today - timedelta(days=d + 1)).date()
                await conn.execute(
                    "SELECT bench_grow_day($1, $2, $3, $4, $5, $6)",
                    *(day, first, n, tenants, NOOP, n >= BULK_ROWS),
                    timeout=3600,
                )
                first += n
                bar.update(n)


async def sample_ids(conn: asyncpg.Connection, have: int, k: int) -> list[asyncpg.Record]:
    """About k runs drawn from the whole history (a block sample: every partition has its chance)."""
    percent = min(100.0, 100.0 * 20 * k / max(have, 1))
    return list(await conn.fetch(SAMPLE_IDS, percent, k, timeout=600))


async def size(conn: asyncpg.Connection) -> tuple[int, int]:
    row = await conn.fetchrow(HISTORY_SIZE)
    return int(row["partitions"]), int(row["bytes"])
