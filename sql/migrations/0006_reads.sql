-- yuxi: what the API reads, scoped to one user. Unknown, deleted and other users'
-- objects are all "not found".

CREATE TYPE yuxi.thread_info AS (
    id             uuid,
    agent_id       text,
    project_id     uuid,
    title          text,
    thread_status  text,
    created_at     timestamptz,
    updated_at     timestamptz
);

-- loading: a run is pending or running; ready: a run finished since the thread was last
-- viewed; done: nothing new.
CREATE FUNCTION yuxi.thread_status_of(p_last_run_id uuid, p_last_viewed_run_id uuid) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN r.status IN ('pending', 'running', 'cancel_requested') THEN 'loading'
        WHEN r.run_id IS NOT NULL AND p_last_run_id IS DISTINCT FROM p_last_viewed_run_id THEN 'ready'
        ELSE 'done'
    END
    FROM (SELECT 1) one
    LEFT JOIN yuxi.agent_runs r ON r.run_id = p_last_run_id
$$;

CREATE FUNCTION yuxi.thread_info_of(c yuxi.conversations) RETURNS yuxi.thread_info
LANGUAGE sql STABLE AS $$
    SELECT c.thread_id, c.agent_slug, c.project_id, c.title,
           yuxi.thread_status_of(c.last_run_id, c.last_viewed_run_id), c.created_at, c.updated_at
$$;

CREATE FUNCTION yuxi.thread_get(p_uid uuid, p_thread_id uuid) RETURNS yuxi.thread_info
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_conv yuxi.conversations;
BEGIN
    SELECT * INTO v_conv FROM yuxi.conversations
    WHERE thread_id = p_thread_id AND uid = p_uid AND status = 'active';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'thread % not found', p_thread_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN yuxi.thread_info_of(v_conv);
END;
$$;

CREATE FUNCTION yuxi.thread_list(p_uid uuid) RETURNS SETOF yuxi.thread_info
LANGUAGE sql STABLE AS $$
    SELECT (yuxi.thread_info_of(c)).*
    FROM yuxi.conversations c
    WHERE c.uid = p_uid AND c.status = 'active'
    ORDER BY c.updated_at DESC, c.thread_id
$$;

-- Marks the thread's latest run as seen. Reading history never does this.
CREATE FUNCTION yuxi.thread_mark_viewed(p_uid uuid, p_thread_id uuid) RETURNS yuxi.thread_info
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
BEGIN
    -- A run still in progress is not "seen": it becomes ready when it finishes.
    UPDATE yuxi.conversations c
    SET last_viewed_run_id = CASE
            WHEN EXISTS (SELECT 1 FROM yuxi.agent_runs r WHERE r.run_id = c.last_run_id
                         AND r.status IN ('pending', 'running', 'cancel_requested'))
            THEN c.last_viewed_run_id ELSE c.last_run_id END
    WHERE c.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active'
    RETURNING * INTO v_conv;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'thread % not found', p_thread_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN yuxi.thread_info_of(v_conv);
END;
$$;

-- Soft-deletes a thread: its queued requests are cancelled and its active run is asked
-- to stop, so nothing keeps running for a conversation nobody can see.
CREATE FUNCTION yuxi.thread_delete(p_uid uuid, p_thread_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
    v_request text;
BEGIN
    SELECT * INTO v_conv FROM yuxi.conversations
    WHERE thread_id = p_thread_id AND uid = p_uid AND status = 'active'
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'thread % not found', p_thread_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    FOR v_request IN
        SELECT request_id FROM yuxi.agent_run_requests WHERE thread_id = p_thread_id AND status = 'queued'
    LOOP
        UPDATE yuxi.agent_run_requests SET status = 'cancelled', updated_at = clock_timestamp()
        WHERE request_id = v_request;
        UPDATE yuxi.messages SET delivery_status = 'cancelled'
        WHERE request_id = v_request AND role = 'user';
    END LOOP;
    IF EXISTS (SELECT 1 FROM yuxi.agent_runs WHERE run_id = v_conv.last_run_id
               AND status IN ('pending', 'running', 'interrupted')) THEN
        PERFORM yuxi.run_request_cancel(v_conv.last_run_id, p_uid);
    END IF;
    UPDATE yuxi.conversations SET status = 'deleted', paused_by_run_id = NULL, updated_at = clock_timestamp()
    WHERE thread_id = p_thread_id;
END;
$$;

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

-- The requests of a thread, oldest first, as request views.
CREATE FUNCTION yuxi.thread_requests(p_uid uuid, p_thread_id uuid) RETURNS SETOF yuxi.request_info
LANGUAGE sql STABLE AS $$
    SELECT r.request_id, r.thread_id, r.status, r.queue_policy, yuxi.request_queue_position(r),
           r.input_message_id, r.dispatched_run_id, r.created_at
    FROM yuxi.agent_run_requests r
    JOIN yuxi.conversations c ON c.thread_id = r.thread_id
    WHERE r.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active'
    ORDER BY r.created_at, r.id
$$;

-- A run's outcome: its status, the text of its final assistant message, its error.
CREATE FUNCTION yuxi.run_result(p_run_id uuid, p_uid uuid DEFAULT NULL)
RETURNS TABLE (status text, output text, final_message_id bigint, error_type text, error_message text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_run yuxi.agent_runs;
BEGIN
    v_run := yuxi.run_get(p_run_id, p_uid);
    RETURN QUERY
    SELECT v_run.status, m.content, v_run.output_message_id, v_run.error_type, v_run.error_message
    FROM (SELECT 1) one
    LEFT JOIN yuxi.messages m ON m.id = v_run.output_message_id;
END;
$$;

-- Events of a run after a seq, for SSE replay.
CREATE FUNCTION yuxi.run_events_after(p_run_id uuid, p_after bigint, p_limit integer DEFAULT 1000)
RETURNS TABLE (seq bigint, event text, payload jsonb, created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT e.seq, e.event, e.payload, e.created_at FROM yuxi.run_events e
    WHERE e.run_id = p_run_id AND e.seq > p_after
    ORDER BY e.seq
    LIMIT p_limit
$$;

-- The run's stored `end` event (none while the run is not over).
CREATE FUNCTION yuxi.run_end_event(p_run_id uuid)
RETURNS TABLE (seq bigint, event text, payload jsonb, created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT e.seq, e.event, e.payload, e.created_at FROM yuxi.run_events e
    WHERE e.run_id = p_run_id AND e.event = 'end'
$$;

-- Agents a user can see.
CREATE FUNCTION yuxi.agents_visible(p_uid uuid)
RETURNS TABLE (slug text, name text, description text, backend_id text, config_json jsonb,
               share_scope text, is_subagent boolean, updated_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT a.slug, a.name, a.description, a.backend_id, a.config_json, a.share_scope,
           a.is_subagent, a.updated_at
    FROM yuxi.agents a
    WHERE a.deleted_at IS NULL AND yuxi.agent_visible_to(a.slug, p_uid)
    ORDER BY a.slug
$$;

CREATE FUNCTION yuxi.project_create(p_uid uuid, p_name text, p_workdir_path text)
RETURNS yuxi.projects
LANGUAGE plpgsql AS $$
DECLARE
    v_project yuxi.projects;
BEGIN
    IF p_name IS NULL OR length(btrim(p_name)) = 0 OR length(p_name) > 200 THEN
        RAISE EXCEPTION 'a project name is 1-200 characters' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    INSERT INTO yuxi.projects (uid, name, workdir_path) VALUES (p_uid, p_name, p_workdir_path)
    RETURNING * INTO v_project;
    RETURN v_project;
END;
$$;

-- Creates (p_create) or updates an agent, with the users it is shared with when
-- share_scope is 'selected'. Admin-only at the API; open to operators from psql.
CREATE FUNCTION yuxi.agent_save(
    p_create boolean, p_slug text, p_name text, p_description text, p_backend_id text,
    p_config jsonb, p_share_scope text, p_shared_with uuid[], p_is_subagent boolean,
    p_max_run_attempts integer
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_slug IS NULL OR p_slug !~ '^[a-z0-9][a-z0-9_-]{0,62}$' THEN
        RAISE EXCEPTION 'an agent id is 1-63 characters of a-z, 0-9, _ and - (starting with a letter or digit)'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_name IS NULL OR p_name ~ '^[[:space:]]*$' OR length(p_name) > 200 THEN
        RAISE EXCEPTION 'an agent name is 1-200 characters' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_config IS NULL OR jsonb_typeof(p_config) <> 'object'
       OR jsonb_typeof(coalesce(p_config -> 'context', '{}')) <> 'object' THEN
        RAISE EXCEPTION 'config must be an object like {"context": {...}}'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_max_run_attempts IS NULL OR p_max_run_attempts NOT BETWEEN 1 AND 10 THEN
        RAISE EXCEPTION 'max_run_attempts must be between 1 and 10'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_create THEN
        INSERT INTO yuxi.agents (slug, name, description, backend_id, config_json, share_scope,
                                 is_subagent, max_run_attempts)
        VALUES (p_slug, p_name, coalesce(p_description, ''), p_backend_id, p_config, p_share_scope,
                coalesce(p_is_subagent, false), p_max_run_attempts)
        ON CONFLICT (slug) DO NOTHING;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'agent % already exists', p_slug USING ERRCODE = 'YQ011', HINT = 'agent_exists';
        END IF;
    ELSE
        UPDATE yuxi.agents
        SET name = p_name, description = coalesce(p_description, ''), backend_id = p_backend_id,
            config_json = p_config, share_scope = p_share_scope,
            is_subagent = coalesce(p_is_subagent, false), max_run_attempts = p_max_run_attempts,
            updated_at = now()
        WHERE slug = p_slug AND deleted_at IS NULL;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'agent % not found', p_slug USING ERRCODE = 'YN001', HINT = 'not_found';
        END IF;
        DELETE FROM yuxi.agent_shares WHERE agent_slug = p_slug;
    END IF;
    INSERT INTO yuxi.agent_shares (agent_slug, uid)
    SELECT p_slug, u.id FROM yuxi.users u
    WHERE u.id = ANY (coalesce(p_shared_with, '{}')) AND u.deleted_at IS NULL
    ON CONFLICT DO NOTHING;
END;
$$;
