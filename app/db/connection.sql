-- How a connection plans: the statement of app/db/connection.py.
-- Named blocks, loaded by app/db/queries.py (which says how they are written).

-- name: plan_generically
-- For the rest of the transaction, a statement's plan is made once on its connection and kept
-- (connections plan every statement anew). Only for statements that name no day, so that no plan of
-- theirs can leave a day out: theirs locks every day either way.
SELECT set_config('plan_cache_mode', 'force_generic_plan', true);
