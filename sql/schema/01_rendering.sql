-- yuxi: history entries, the JSON each message and run carries for history reads.
--
-- GET /api/chat/thread/{id}/history returns every run and every message of a thread in
-- one response. Decoding those rows and encoding them again costs far more than the read
-- itself on a long conversation (10,000 messages: about 100 ms in Python against about
-- 20 ms in PostgreSQL), so each message and run carries its own history entry as a
-- stored generated column (messages.history_entry, agent_runs.history_entry in
-- 02_tables.sql, which is why these functions come before the tables): PostgreSQL
-- computes it on every insert and update of the row, after the BEFORE triggers, and
-- nobody can write it by hand, so it never disagrees with the row. A history read
-- concatenates the entries in chunks (12_history.sql) and the API streams them as they
-- come.
--
-- Times are rendered as the API renders them everywhere else (msgspec): UTC, ISO 8601,
-- "Z", microseconds only when not zero.

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
COMMENT ON FUNCTION yuxi.json_time(timestamptz) IS
    'Internal: a time as the API renders it in JSON (UTC, ISO 8601, Z), or null';

-- A JSON string (escaped) or null.
CREATE FUNCTION yuxi.json_text(p_value text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN coalesce(to_json(p_value)::text, 'null');
END;
$$;
COMMENT ON FUNCTION yuxi.json_text(text) IS
    'Internal: a JSON string (escaped), or null';

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
COMMENT ON FUNCTION yuxi.message_history_entry(bigint, text, text, uuid, text, text, jsonb, timestamptz) IS
    'Internal: a message as one element of history''s "history" (computes messages.history_entry)';

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
COMMENT ON FUNCTION yuxi.run_history_entry(uuid, text, text, uuid, text, timestamptz, timestamptz, timestamptz) IS
    'Internal: a run as one element of history''s "runs" (computes agent_runs.history_entry)';
