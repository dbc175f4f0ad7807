-- The audit log (audit_events): the statements of app/db/audit.py.
-- Named blocks, loaded by app/db/queries.py (which says how they are written).
--
-- audit_events (migration 0026): written by app.services.audit in the change's own transaction,
-- read newest first, its days made and dropped by partition maintenance.

-- name: insert_audit_event
-- `at` is the moment of the write (clock_timestamp: two events of one transaction keep their order).
INSERT INTO audit_events (tenant_id, at, id, actor_type, actor_id, actor_key_id, action, target,
                          request_id, detail)
VALUES (:tenant_id, clock_timestamp(), gen_random_uuid(), :actor_type, :actor_id, :actor_key_id,
        :action, :target, :request_id, CAST(:detail AS jsonb))
RETURNING at, id;

-- name: update_audit_detail
-- A bulk action's one event, its counts brought up to date by each chunk's own transaction.
UPDATE audit_events SET detail = CAST(:detail AS jsonb)
WHERE tenant_id = :tenant_id AND at = :at AND id = :id;

-- name: list_audit_events
-- A tenant's events newest first, after the cursor (at, id) of the previous page's last; of one
-- action where given (audit_events_by_action), else by the key.
SELECT at, id, actor_type, actor_id, actor_key_id, action, target, request_id, detail
FROM audit_events
WHERE tenant_id = :tenant_id
  AND (CAST(:action AS text) IS NULL OR action = :action)
  AND (CAST(:cursor_at AS timestamptz) IS NULL
       OR (at, id) < (CAST(:cursor_at AS timestamptz), CAST(:cursor_id AS uuid)))
ORDER BY at DESC, id DESC
LIMIT :limit;
