-- yuxi: reading a thread's history: its runs and messages, and the whole response as
-- the API streams it, built from the history entries each row carries
-- (01_rendering.sql).

-- Every run of a thread, lightest form, in creation order (history's `runs`).
CREATE FUNCTION yuxi.thread_runs(p_uid uuid, p_thread_id uuid)
RETURNS TABLE (run_id uuid, request_id text, run_type text, created_by_run_id uuid, status text,
               created_at timestamptz, started_at timestamptz, finished_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT r.run_id, r.request_id, r.run_type, r.created_by_run_id, r.status,
           r.created_at, r.started_at, r.finished_at
    FROM yuxi.agent_runs r
    JOIN yuxi.conversations c ON c.thread_id = r.thread_id
    WHERE r.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active'
    ORDER BY r.created_at, r.run_id
$$;
COMMENT ON FUNCTION yuxi.thread_runs(uuid, uuid) IS
    'Every run of the user''s thread, lightest form, in creation order';

-- The subagent runs of a thread (the state view's subagent_runs): each child run with
-- its agent, status and the run that started it, in creation order.
CREATE FUNCTION yuxi.thread_subagent_runs(p_uid uuid, p_thread_id uuid)
RETURNS TABLE (run_id uuid, agent_slug text, status text, created_by_run_id uuid,
               created_at timestamptz, finished_at timestamptz, error_message text)
LANGUAGE sql STABLE AS $$
    SELECT r.run_id, r.agent_slug, r.status, r.created_by_run_id, r.created_at, r.finished_at,
           r.error_message
    FROM yuxi.agent_runs r
    JOIN yuxi.conversations c ON c.thread_id = r.thread_id
    WHERE r.thread_id = p_thread_id AND r.run_type = 'subagent' AND c.uid = p_uid
      AND c.status = 'active'
    ORDER BY r.created_at, r.run_id
$$;
COMMENT ON FUNCTION yuxi.thread_subagent_runs(uuid, uuid) IS
    'The subagent runs of the user''s thread (agent, status, parent run), in creation order';

-- Every message of a thread in order (history's `history`); linked to runs by run_id.
CREATE FUNCTION yuxi.thread_messages(p_uid uuid, p_thread_id uuid)
RETURNS TABLE (id bigint, role text, content text, run_id uuid, request_id text,
               delivery_status text, metadata jsonb, created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT m.id, m.role, m.content, m.run_id, m.request_id, m.delivery_status, m.metadata, m.created_at
    FROM yuxi.messages m
    JOIN yuxi.conversations c ON c.thread_id = m.thread_id
    WHERE m.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active'
    ORDER BY m.id
$$;
COMMENT ON FUNCTION yuxi.thread_messages(uuid, uuid) IS
    'Every message of the user''s thread, in order';

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
        || ',"workdir":' || yuxi.json_text(t.workdir)
        || '}'
$$;
COMMENT ON FUNCTION yuxi.thread_json(yuxi.thread_info) IS
    'Internal: a thread as the API renders it (JSON text)';

-- The entries of a thread's runs (by creation time, then id) and of its messages (by
-- id), in chunks of 256 comma-separated entries (the last one fewer), in chunk order. The API streams
-- them between the thread and the closing brackets, so the response leaves while
-- PostgreSQL is still producing it; chunks, not one value per list, because sending one
-- multi-megabyte value costs PostgreSQL about twice the CPU. Nothing for a thread the
-- user cannot see (the API calls yuxi.thread_get first, in the same snapshot).
-- A chunk starts at every 256th key (numbered from the index alone) and is read by an
-- index range scan of its own, in order: no entry is sorted, neither all of them by
-- chunk nor each chunk again (PostgreSQL 15 sorts for an aggregate's ORDER BY even on
-- sorted input), and the first chunk leaves before the last one is read. string_agg
-- keeps its input's order: a subquery with ORDER BY and LIMIT is never flattened, and
-- one plain aggregate reads it as it comes. The chunk starts are sorted by chunk (a
-- few rows) so that ORDER BY chunk, here and in the caller, sorts no entry.
CREATE FUNCTION yuxi.thread_history_runs(p_uid uuid, p_thread_id uuid)
RETURNS TABLE (chunk bigint, entries text)
LANGUAGE sql STABLE AS $$
    SELECT f.chunk,
           (SELECT string_agg(r.history_entry, ',')
            FROM (SELECT history_entry
                  FROM yuxi.agent_runs
                  WHERE thread_id = p_thread_id AND (created_at, run_id) >= (f.created_at, f.run_id)
                  ORDER BY created_at, run_id
                  LIMIT 256) r)
    FROM (SELECT n / 256 AS chunk, created_at, run_id
          FROM (SELECT created_at, run_id, row_number() OVER (ORDER BY created_at, run_id) - 1 AS n
                FROM yuxi.agent_runs
                WHERE thread_id = p_thread_id
                  AND EXISTS (SELECT 1 FROM yuxi.conversations c
                              WHERE c.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active')) k
          WHERE n % 256 = 0
          ORDER BY chunk) f
    ORDER BY f.chunk
$$;
COMMENT ON FUNCTION yuxi.thread_history_runs(uuid, uuid) IS
    'History: the run entries of the user''s thread, in chunks of 256 comma-separated JSON objects';

CREATE FUNCTION yuxi.thread_history_messages(p_uid uuid, p_thread_id uuid)
RETURNS TABLE (chunk bigint, entries text)
LANGUAGE sql STABLE AS $$
    SELECT f.chunk,
           (SELECT string_agg(m.history_entry, ',')
            FROM (SELECT history_entry
                  FROM yuxi.messages
                  WHERE thread_id = p_thread_id AND id >= f.id
                  ORDER BY id
                  LIMIT 256) m)
    FROM (SELECT n / 256 AS chunk, id
          FROM (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n
                FROM yuxi.messages
                WHERE thread_id = p_thread_id
                  AND EXISTS (SELECT 1 FROM yuxi.conversations c
                              WHERE c.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active')) k
          WHERE n % 256 = 0
          ORDER BY chunk) f
    ORDER BY f.chunk
$$;
COMMENT ON FUNCTION yuxi.thread_history_messages(uuid, uuid) IS
    'History: the message entries of the user''s thread, in chunks of 256 comma-separated JSON objects';

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
COMMENT ON FUNCTION yuxi.thread_history_json(uuid, uuid) IS
    'The whole history response {thread, runs, history} as JSON text, byte for byte what the API sends. Raises not_found (YN001)';

-- What a run was asked, as stored: the `init` event a run's stream starts with (the
-- client shows the saved input before anything streams). The user's message of a chat
-- run, and the run's input (model_spec, tool_approval_mode; resume: the answer; subagent:
-- the task).
CREATE FUNCTION yuxi.run_input(p_run_id uuid, p_uid uuid DEFAULT NULL)
RETURNS TABLE (run_id uuid, thread_id uuid, request_id text, run_type text,
               message_id bigint, query text, input jsonb)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_run yuxi.agent_runs;
BEGIN
    v_run := yuxi.run_get(p_run_id, p_uid);
    RETURN QUERY
    SELECT v_run.run_id, v_run.thread_id, v_run.request_id, v_run.run_type,
           v_run.input_message_id, m.content, v_run.input_payload
    FROM (SELECT 1) one
    LEFT JOIN yuxi.messages m ON m.id = v_run.input_message_id;
END;
$$;
COMMENT ON FUNCTION yuxi.run_input(uuid, uuid) IS
    'What a run was asked, as stored: its user message (message_id, query) and input payload, for the init event of its stream. Raises not_found (YN001)';
