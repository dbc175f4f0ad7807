-- The database's current shape, the contract every statement in app/db/*.sql is written against.
--
-- The files of this directory run in name order into an empty database and make exactly what the
-- migrations (alembic/versions/) make at head: tests/integration/test_schema_contract.py compares
-- the two, object by object, through the catalogs. A migration that adds or redefines an object
-- changes its text here too (`python -m app.db.schema_dump --server URL NAME` prints it as the
-- migrations leave it; `--check` runs the comparison). Each object is written once, as it is now,
-- with the reason it is so; a function's body is compared without its comments, so the reasons
-- here may say more than a migration's. Nothing loads these files into a deployed database: the
-- migrations make and change it (`scheduler migrate`).
--
-- Columns are listed in the order the table holds them (a migration appends): `SELECT *` and
-- `INSERT ... SELECT *` between a partition and its parent depend on it.


-- A UUID whose leading 48 bits are `ts` in Unix milliseconds (the UUIDv7 layout), so the id alone
-- names the day partition of its run. gen_random_uuid() gives the random bits and the variant; byte
-- 6 gets version 7.
CREATE FUNCTION scheduler_run_id(ts timestamptz) RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(
        set_byte(
            overlay(r.b PLACING substring(int8send(floor(extract(epoch FROM ts) * 1000)::bigint) FROM 3) FROM 1 FOR 6),
            6, (get_byte(r.b, 6) & 15) | 112),
        'hex')::uuid
    FROM (SELECT uuid_send(gen_random_uuid()) AS b) AS r
$$;
