-- The NOTIFY that tells idle engines runs are due: the statement of app/db/wakeups.py.
-- Named blocks, loaded by app/db/queries.py (which says how they are written).

-- name: notify_runs_due
-- Wakes idle engines at commit; the payload lowers their claim floor to the oldest new run.
SELECT pg_notify(:channel, CAST(:floor AS text));
