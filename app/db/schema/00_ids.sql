-- FUNCTION: scheduler_run_id(timestamp with time zone)
CREATE FUNCTION scheduler_run_id(ts timestamp with time zone) RETURNS uuid
    LANGUAGE sql PARALLEL SAFE
    AS $$
    SELECT encode(
        set_byte(
            overlay(r.b PLACING substring(int8send(floor(extract(epoch FROM ts) * 1000)::bigint) FROM 3) FROM 1 FOR 6),
            6, (get_byte(r.b, 6) & 15) | 112),
        'hex')::uuid
    FROM (SELECT uuid_send(gen_random_uuid()) AS b) AS r
$$;
