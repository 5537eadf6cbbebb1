-- yuxi: history served as JSON rendered when a row is written.
--
-- GET /api/chat/thread/{id}/history returns every run and every message of a thread in
-- one response. Decoding those rows and encoding them again costs far more than the read
-- itself on a long conversation (10,000 messages: about 100 ms in Python against about
-- 20 ms in PostgreSQL), so each message and run carries its own history entry as a
-- stored generated column: PostgreSQL computes it on every insert and update of the
-- row, after the BEFORE triggers, and nobody can write it by hand, so it never disagrees
-- with the row. A history read concatenates the entries in chunks and the API streams
-- them as they come.
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

ALTER TABLE yuxi.messages ADD COLUMN history_entry text GENERATED ALWAYS AS (
    yuxi.message_history_entry(id, role, content, run_id, request_id, delivery_status,
                               metadata, created_at)
) STORED;

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

ALTER TABLE yuxi.agent_runs ADD COLUMN history_entry text GENERATED ALWAYS AS (
    yuxi.run_history_entry(run_id, request_id, run_type, created_by_run_id, status,
                           created_at, started_at, finished_at)
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

-- The entries of a thread's runs (by creation time, then id) and of its messages (by
-- id), in chunks of 256 comma-separated entries (the last one fewer), in chunk order. The API streams
-- them between the thread and the closing brackets, so the response leaves while
-- PostgreSQL is still producing it; chunks, not one value per list, because sending one
-- multi-megabyte value costs PostgreSQL about twice the CPU. Nothing for a thread the
-- user cannot see (the API calls yuxi.thread_get first, in the same snapshot).
CREATE FUNCTION yuxi.thread_history_runs(p_uid uuid, p_thread_id uuid)
RETURNS TABLE (chunk bigint, entries text)
LANGUAGE sql STABLE AS $$
    SELECT r.chunk, string_agg(r.history_entry, ',' ORDER BY r.created_at, r.run_id)
    FROM (SELECT history_entry, created_at, run_id,
                 (row_number() OVER (ORDER BY created_at, run_id) - 1) / 256 AS chunk
          FROM yuxi.agent_runs
          WHERE thread_id = p_thread_id
            AND EXISTS (SELECT 1 FROM yuxi.conversations c
                        WHERE c.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active')) r
    GROUP BY r.chunk
    ORDER BY r.chunk
$$;

CREATE FUNCTION yuxi.thread_history_messages(p_uid uuid, p_thread_id uuid)
RETURNS TABLE (chunk bigint, entries text)
LANGUAGE sql STABLE AS $$
    SELECT m.chunk, string_agg(m.history_entry, ',' ORDER BY m.id)
    FROM (SELECT history_entry, id, (row_number() OVER (ORDER BY id) - 1) / 256 AS chunk
          FROM yuxi.messages
          WHERE thread_id = p_thread_id
            AND EXISTS (SELECT 1 FROM yuxi.conversations c
                        WHERE c.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active')) m
    GROUP BY m.chunk
    ORDER BY m.chunk
$$;

-- The whole history response, {thread, runs, history}, as one JSON text: the body
-- GET /api/chat/thread/{id}/history sends, byte for byte. For psql. Raises not_found
-- (YN001) like thread_get.
CREATE FUNCTION yuxi.thread_history_json(p_uid uuid, p_thread_id uuid) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT '{"thread":' || yuxi.thread_json(yuxi.thread_get(p_uid, p_thread_id))
        || ',"runs":['
        || coalesce((SELECT string_agg(entries, ',' ORDER BY chunk)
                     FROM yuxi.thread_history_runs(p_uid, p_thread_id)), '')
        || '],"history":['
        || coalesce((SELECT string_agg(entries, ',' ORDER BY chunk)
                     FROM yuxi.thread_history_messages(p_uid, p_thread_id)), '')
        || ']}'
$$;
