-- The entries are computed on every insert and update of a message or run, one
-- statement at a time, so the functions below are PL/pgSQL: a SQL function that cannot
-- be inlined (these could not: IMMUTABLE around STABLE to_char and to_json) is planned
-- again on each such statement, PL/pgSQL keeps its plans for the session (as SQL
-- helpers they added about 1 ms of server CPU per submitted, claimed and finished run).
-- IMMUTABLE although to_char and to_json are only STABLE: the patterns used here
-- depend on no locale or setting, the time zone is explicit, and text's JSON form
-- depends on nothing else.
CREATE FUNCTION yuxi.json_time(p_at timestamptz) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN CASE
        WHEN p_at IS NULL THEN 'null'
        WHEN date_part('microseconds', p_at)::int % 1000000 = 0
            THEN '"' || to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') || 'Z"'
        ELSE '"' || to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') || 'Z"'
    END;
END;
$$;

-- A JSON string (escaped) or null.
CREATE FUNCTION yuxi.json_text(p_value text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN coalesce(to_json(p_value)::text, 'null');
END;
$$;

-- One element of history's `history`: the fields of HistoryMessage, in its order. One
-- PL/pgSQL call per written row, the text fields escaped inline (to_json).
CREATE FUNCTION yuxi.message_history_entry(
    p_id bigint, p_role text, p_content text, p_run_id uuid, p_request_id text,
    p_delivery_status text, p_metadata jsonb, p_created_at timestamptz
) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN '{"id":' || p_id
        || ',"role":' || to_json(p_role)
        || ',"content":' || to_json(p_content)
        || ',"run_id":' || coalesce('"' || p_run_id || '"', 'null')
        || ',"request_id":' || coalesce(to_json(p_request_id)::text, 'null')
        || ',"delivery_status":' || coalesce(to_json(p_delivery_status)::text, 'null')
        || ',"metadata":' || p_metadata
        || ',"created_at":' || yuxi.json_time(p_created_at)
        || '}';
END;
$$;

-- One element of history's `runs`: the fields of HistoryRun, in its order.
CREATE FUNCTION yuxi.run_history_entry(
    p_run_id uuid, p_request_id text, p_run_type text, p_created_by_run_id uuid,
    p_status text, p_created_at timestamptz, p_started_at timestamptz,
    p_finished_at timestamptz
) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN '{"run_id":"' || p_run_id
        || '","request_id":' || to_json(p_request_id)
        || ',"run_type":' || to_json(p_run_type)
        || ',"created_by_run_id":' || coalesce('"' || p_created_by_run_id || '"', 'null')
        || ',"status":' || to_json(p_status)
        || ',"timing":{"created_at":' || yuxi.json_time(p_created_at)
        || ',"started_at":' || yuxi.json_time(p_started_at)
        || ',"finished_at":' || yuxi.json_time(p_finished_at)
        || '}}';
END;
$$;
