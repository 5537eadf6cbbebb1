-- yuxi: history served as JSON rendered when a row is written.
--
-- GET /api/chat/thread/{id}/history returns every run and every message of a thread in
-- one response. Decoding those rows and encoding them again costs far more than the read
-- itself on a long conversation (10,000 messages: about 100 ms in Python against about
-- 20 ms in PostgreSQL), so each message and run carries its own history entry as a
-- stored generated column: PostgreSQL computes it on every insert and update of the
-- row, after the BEFORE triggers, and nobody can write it by hand, so it never disagrees
-- with the row. A history read concatenates the entries (yuxi.thread_history_json) and
-- the API sends the text as it is.
--
-- Times are rendered as the API renders them everywhere else (msgspec): UTC, ISO 8601,
-- "Z", microseconds only when not zero.

-- IMMUTABLE although to_char is only STABLE: the patterns used here do not depend on the
-- locale or any setting, and the time zone is explicit.
CREATE FUNCTION yuxi.json_time(p_at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN p_at IS NULL THEN 'null'
        WHEN date_part('microseconds', p_at)::int % 1000000 = 0
            THEN '"' || to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') || 'Z"'
        ELSE '"' || to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') || 'Z"'
    END
$$;

-- A JSON string (escaped) or null. IMMUTABLE: text's JSON form depends on nothing else.
CREATE FUNCTION yuxi.json_text(p_value text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(to_json(p_value)::text, 'null')
$$;

-- One element of history's `history`: the fields of HistoryMessage, in its order.
ALTER TABLE yuxi.messages ADD COLUMN history_entry text GENERATED ALWAYS AS (
    '{"id":' || id
    || ',"role":' || yuxi.json_text(role)
    || ',"content":' || yuxi.json_text(content)
    || ',"run_id":' || yuxi.json_text(run_id::text)
    || ',"request_id":' || yuxi.json_text(request_id)
    || ',"delivery_status":' || yuxi.json_text(delivery_status)
    || ',"metadata":' || metadata::text
    || ',"created_at":' || yuxi.json_time(created_at)
    || '}'
) STORED;

-- One element of history's `runs`: the fields of HistoryRun, in its order.
ALTER TABLE yuxi.agent_runs ADD COLUMN history_entry text GENERATED ALWAYS AS (
    '{"run_id":"' || run_id
    || '","request_id":' || yuxi.json_text(request_id)
    || ',"run_type":' || yuxi.json_text(run_type)
    || ',"created_by_run_id":' || yuxi.json_text(created_by_run_id::text)
    || ',"status":' || yuxi.json_text(status)
    || ',"timing":{"created_at":' || yuxi.json_time(created_at)
    || ',"started_at":' || yuxi.json_time(started_at)
    || ',"finished_at":' || yuxi.json_time(finished_at)
    || '}}'
) STORED;

-- The thread as the API shows it (Thread).
CREATE FUNCTION yuxi.thread_json(t yuxi.thread_info) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT '{"id":"' || t.id
        || '","agent_id":' || yuxi.json_text(t.agent_id)
        || ',"project_id":' || yuxi.json_text(t.project_id::text)
        || ',"title":' || yuxi.json_text(t.title)
        || ',"thread_status":' || yuxi.json_text(t.thread_status)
        || ',"created_at":' || yuxi.json_time(t.created_at)
        || ',"updated_at":' || yuxi.json_time(t.updated_at)
        || '}'
$$;

-- The whole history response, {thread, runs, history}, as JSON text: runs by creation
-- time then id, messages by id. One statement, so runs and messages come from one
-- snapshot. Raises not_found (YN001) like thread_get. work_mem is raised for the call so
-- that ordering a long thread's entries (about 460 bytes each) stays in memory.
CREATE FUNCTION yuxi.thread_history_json(p_uid uuid, p_thread_id uuid) RETURNS text
LANGUAGE plpgsql STABLE SET work_mem = '64MB' AS $$
DECLARE
    v_thread yuxi.thread_info := yuxi.thread_get(p_uid, p_thread_id);
BEGIN
    RETURN concat(
        '{"thread":', yuxi.thread_json(v_thread),
        ',"runs":[',
        (SELECT string_agg(r.history_entry, ',' ORDER BY r.created_at, r.run_id)
         FROM yuxi.agent_runs r WHERE r.thread_id = p_thread_id),
        '],"history":[',
        (SELECT string_agg(m.history_entry, ',' ORDER BY m.id)
         FROM yuxi.messages m WHERE m.thread_id = p_thread_id),
        ']}');
END;
$$;
