-- LangGraph threads' state and runs (docs/langgraph.md): update_state appends to the
-- thread's message history under the thread's lock (yuxi.lg_thread_state_lock,
-- yuxi.lg_thread_state_update), threads.copy copies a thread (yuxi.lg_thread_copy), and
-- runs.delete takes an ended run out of the LangGraph runs list (lg_runs.deleted_at,
-- yuxi.lg_run_delete) while its messages and events stay.

ALTER TABLE yuxi.lg_runs ADD COLUMN deleted_at timestamptz;
COMMENT ON COLUMN yuxi.lg_runs.deleted_at IS
    'When runs.delete took the run out of the LangGraph runs list (its request, messages and events stay)';

-- The LangGraph runs of the caller's thread, newest first: every request but rejected
-- ones, with its run (NULL while queued) and what lg_runs holds.
CREATE OR REPLACE FUNCTION yuxi.lg_thread_runs(p_uid uuid, p_thread_id uuid, p_request_id text DEFAULT NULL)
RETURNS TABLE (request_id text, thread_id uuid, agent_slug text, request_status text,
               run_id uuid, run_status text, error_type text, error_message text,
               created_at timestamptz, updated_at timestamptz, metadata jsonb,
               multitask_strategy text, stream_modes text[])
LANGUAGE sql STABLE AS $$
    SELECT r.request_id, r.thread_id, c.agent_slug, r.status, r.dispatched_run_id, ar.status,
           ar.error_type, ar.error_message, r.created_at, greatest(r.updated_at, ar.updated_at),
           coalesce(l.metadata, '{}'), coalesce(l.multitask_strategy, 'enqueue'),
           coalesce(l.stream_modes, '{}')
    FROM yuxi.agent_run_requests r
    JOIN yuxi.conversations c ON c.thread_id = r.thread_id
    LEFT JOIN yuxi.agent_runs ar ON ar.run_id = r.dispatched_run_id
    LEFT JOIN yuxi.lg_runs l ON l.request_id = r.request_id
    WHERE r.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active'
      AND r.status <> 'rejected' AND (p_request_id IS NULL OR r.request_id = p_request_id)
      AND l.deleted_at IS NULL
    ORDER BY r.created_at DESC, r.id DESC
$$;
COMMENT ON FUNCTION yuxi.lg_thread_runs(uuid, uuid, text) IS
    'LangGraph API: the caller''s thread''s runs (requests but rejected and deleted ones) newest first, or one of them';

-- Locks the caller's thread for a change of its state (update_state, copy, prune) and
-- checks that nothing runs on it: no active run (run_busy), no queued request (run_busy:
-- it would run from the state being changed), no run waiting for a resume
-- (run_interrupted). Held until the caller's transaction ends, so a run submitted
-- meanwhile waits for the lock and starts from the changed state.
CREATE FUNCTION yuxi.lg_thread_state_lock(p_uid uuid, p_thread_id uuid) RETURNS yuxi.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
    v_status text;
BEGIN
    v_conv := yuxi.thread_lock(p_uid, p_thread_id);
    SELECT status INTO v_status FROM yuxi.agent_runs WHERE run_id = v_conv.last_run_id;
    IF coalesce(yuxi.run_is_active(v_status), false) OR EXISTS (
           SELECT 1 FROM yuxi.agent_run_requests WHERE thread_id = p_thread_id AND status = 'queued') THEN
        RAISE EXCEPTION 'thread % has a run active or waiting; its state cannot change now', p_thread_id
            USING ERRCODE = 'YQ003', HINT = 'run_busy';
    END IF;
    IF v_status = 'interrupted' THEN
        RAISE EXCEPTION 'thread % is waiting for run % to be resumed', p_thread_id, v_conv.last_run_id
            USING ERRCODE = 'YQ002', HINT = 'run_interrupted';
    END IF;
    RETURN v_conv;
END;
$$;
COMMENT ON FUNCTION yuxi.lg_thread_state_lock(uuid, uuid) IS
    'LangGraph API: locks the caller''s idle thread for a change of its state. Raises not_found (YN001), run_busy (YQ003), run_interrupted (YQ002)';

-- update_state's messages in the thread's message history: p_messages is a JSON array
-- of {role: user|assistant|tool, content, metadata?}, appended in order (a user message
-- is complete: it was never a request). Takes yuxi.lg_thread_state_lock. Returns how
-- many were stored.
CREATE FUNCTION yuxi.lg_thread_state_update(p_uid uuid, p_thread_id uuid, p_messages jsonb)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_count integer;
BEGIN
    IF jsonb_typeof(coalesce(p_messages, '[]')) <> 'array' OR EXISTS (
           SELECT 1 FROM jsonb_array_elements(coalesce(p_messages, '[]')) m
           WHERE jsonb_typeof(m) <> 'object' OR m->>'role' IS NULL
              OR m->>'role' NOT IN ('user', 'assistant', 'tool')
              OR jsonb_typeof(m->'content') IS DISTINCT FROM 'string'
              OR jsonb_typeof(coalesce(m->'metadata', '{}')) <> 'object') THEN
        RAISE EXCEPTION 'messages must be objects with a role (user, assistant, tool) and a text content'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    PERFORM yuxi.lg_thread_state_lock(p_uid, p_thread_id);
    INSERT INTO yuxi.messages (thread_id, role, content, delivery_status, metadata)
    SELECT p_thread_id, m->>'role', m->>'content',
           CASE WHEN m->>'role' = 'user' THEN 'complete' END,
           coalesce(m->'metadata', '{}') || '{"source": "update_state"}'
    FROM jsonb_array_elements(coalesce(p_messages, '[]')) WITH ORDINALITY AS e(m, n)
    ORDER BY n;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    UPDATE yuxi.conversations SET updated_at = clock_timestamp() WHERE thread_id = p_thread_id;
    RETURN v_count;
END;
$$;
COMMENT ON FUNCTION yuxi.lg_thread_state_update(uuid, uuid, jsonb) IS
    'LangGraph API: appends update_state''s messages to the caller''s idle thread''s history, under its lock. Raises invalid_input (YV001), not_found (YN001), run_busy (YQ003), run_interrupted (YQ002)';

-- Copies the caller's idle thread to a new thread p_new_thread_id owned by the caller:
-- same agent, metadata and message history (the copies belong to no run or request).
-- The source stays locked (yuxi.lg_thread_state_lock) until the caller's transaction
-- ends, while the caller copies its checkpoints. Returns the new id.
CREATE FUNCTION yuxi.lg_thread_copy(p_uid uuid, p_thread_id uuid, p_new_thread_id uuid) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
BEGIN
    v_conv := yuxi.lg_thread_state_lock(p_uid, p_thread_id);
    INSERT INTO yuxi.lg_threads (thread_id, uid, metadata)
    SELECT p_new_thread_id, p_uid, coalesce((SELECT metadata FROM yuxi.lg_threads
                                             WHERE thread_id = p_thread_id), '{}');
    INSERT INTO yuxi.conversations (thread_id, uid, agent_slug, title)
    VALUES (p_new_thread_id, p_uid, v_conv.agent_slug, v_conv.title);
    INSERT INTO yuxi.messages (thread_id, role, content, delivery_status, metadata, created_at)
    SELECT p_new_thread_id, role, content, delivery_status,
           metadata || jsonb_build_object('copied_from', id), created_at
    FROM yuxi.messages WHERE thread_id = p_thread_id
    ORDER BY id;
    RETURN p_new_thread_id;
END;
$$;
COMMENT ON FUNCTION yuxi.lg_thread_copy(uuid, uuid, uuid) IS
    'LangGraph API: copies the caller''s idle thread (agent, metadata, messages) to a new thread, holding the source''s lock. Raises not_found (YN001), run_busy (YQ003), run_interrupted (YQ002)';

-- Deletes one of the caller's runs from the LangGraph API's view (runs.list, runs.get):
-- its request, run, messages and events stay (yuxi never deletes them; /api shows
-- them). A queued request or an active run is run_busy: cancel it first.
CREATE FUNCTION yuxi.lg_run_delete(p_uid uuid, p_thread_id uuid, p_request_id text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_request yuxi.agent_run_requests;
    v_status text;
BEGIN
    PERFORM yuxi.thread_lock(p_uid, p_thread_id);
    SELECT * INTO v_request FROM yuxi.agent_run_requests
    WHERE request_id = p_request_id AND thread_id = p_thread_id AND status <> 'rejected'
      AND NOT EXISTS (SELECT 1 FROM yuxi.lg_runs l
                      WHERE l.request_id = p_request_id AND l.deleted_at IS NOT NULL);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % not found', p_request_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    SELECT status INTO v_status FROM yuxi.agent_runs WHERE run_id = v_request.dispatched_run_id;
    IF v_request.status = 'queued' OR coalesce(yuxi.run_is_active(v_status), false) THEN
        RAISE EXCEPTION 'run % is pending or running; cancel it before deleting it', p_request_id
            USING ERRCODE = 'YQ003', HINT = 'run_busy';
    END IF;
    INSERT INTO yuxi.lg_runs (request_id, multitask_strategy, deleted_at)
    VALUES (p_request_id, 'enqueue', clock_timestamp())
    ON CONFLICT (request_id) DO UPDATE SET deleted_at = excluded.deleted_at;
END;
$$;
COMMENT ON FUNCTION yuxi.lg_run_delete(uuid, uuid, text) IS
    'LangGraph API: removes an ended run of the caller''s thread from the LangGraph runs list (its messages and events stay). Raises not_found (YN001), run_busy (YQ003)';
