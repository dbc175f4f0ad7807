-- Session advisory locks (one leader at a time): the statements of app/db/locks.py.
-- Named blocks, loaded by app/db/queries.py (which says how they are written).

-- name: try_advisory_lock
-- One maintenance leader at a time, held by one session for the length of a pass.
SELECT pg_try_advisory_lock(:key);

-- name: advisory_unlock
SELECT pg_advisory_unlock(:key);
