-- yuxi: the LangGraph Platform-compatible API (/lg, docs/langgraph.md). Everything maps
-- onto the queue's own functions: a LangGraph thread is a conversation, a LangGraph run
-- is a request (its run id is the request id), a run's stream is the run's events. What
-- LangGraph keeps that yuxi does not is kept here: a thread created before any run
-- binds it to an agent, thread and run metadata, and the runs that the `interrupt`
-- multitask strategy cancelled in favour of a new request.
--
-- Error codes of this file: YG001 thread_exists, YG002 assistant_mismatch (both 409).

-- A thread of the /lg API: created unbound (no agent yet) or bound at once; its first
-- run (or metadata.graph_id) binds it, creating the conversation under the same id.
CREATE TABLE yuxi.lg_threads (
    thread_id   uuid PRIMARY KEY,
    uid         uuid NOT NULL REFERENCES yuxi.users (id) ON DELETE CASCADE,
    metadata    jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
    deleted     boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    temporary   boolean NOT NULL DEFAULT false
);
CREATE INDEX lg_threads_uid_idx ON yuxi.lg_threads (uid) WHERE NOT deleted;
CREATE INDEX lg_threads_temporary_idx ON yuxi.lg_threads (updated_at) WHERE temporary AND NOT deleted;
COMMENT ON TABLE yuxi.lg_threads IS
    'Threads of the LangGraph-compatible API: their metadata, and those not yet bound to an agent (no conversation yet)';
COMMENT ON COLUMN yuxi.lg_threads.temporary IS
    'A stateless run''s thread (on_completion delete): deleted once its runs have ended';

-- What a LangGraph run asked for beyond the request itself.
CREATE TABLE yuxi.lg_runs (
    request_id          text PRIMARY KEY REFERENCES yuxi.agent_run_requests (request_id) ON DELETE CASCADE,
    metadata            jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
    multitask_strategy  text NOT NULL CHECK (multitask_strategy IN ('enqueue', 'reject', 'interrupt')),
    stream_modes        text[] NOT NULL DEFAULT '{}',
    deleted_at          timestamptz
);
COMMENT ON TABLE yuxi.lg_runs IS
    'Runs of the LangGraph-compatible API: the metadata, multitask strategy and stream modes of a request';
COMMENT ON COLUMN yuxi.lg_runs.deleted_at IS
    'When runs.delete took the run out of the LangGraph runs list (its request, messages and events stay)';

-- A run cancelled by the `interrupt` strategy, and the request that replaces it. When
-- the cancelled run settles and pauses the backlog (a cancelled run does), the trigger
-- below continues it at once: the replacing request is the queue's head.
CREATE TABLE yuxi.lg_interrupts (
    run_id      uuid PRIMARY KEY REFERENCES yuxi.agent_runs (run_id) ON DELETE CASCADE,
    request_id  text NOT NULL REFERENCES yuxi.agent_run_requests (request_id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE yuxi.lg_interrupts IS
    'Runs cancelled by the interrupt multitask strategy, with the request put at the head of the queue in their place';

-- Creates a thread for p_uid. p_agent_slug binds it at once (the agent must be visible
-- and not a subagent). An id already taken: the caller's own thread is returned when
-- p_if_exists is do_nothing, else thread_exists; another user's is thread_exists too.
CREATE FUNCTION yuxi.lg_thread_create(
    p_uid uuid, p_thread_id uuid, p_metadata jsonb DEFAULT '{}', p_agent_slug text DEFAULT NULL,
    p_if_exists text DEFAULT 'raise'
) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_id uuid := coalesce(p_thread_id, gen_random_uuid());
    v_owner uuid;
BEGIN
    IF p_if_exists NOT IN ('raise', 'do_nothing') THEN
        RAISE EXCEPTION 'if_exists must be raise or do_nothing' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF jsonb_typeof(coalesce(p_metadata, '{}')) <> 'object' THEN
        RAISE EXCEPTION 'metadata must be an object' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_agent_slug IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM yuxi.agents WHERE slug = p_agent_slug AND NOT is_subagent
           AND yuxi.agent_visible_to(p_agent_slug, p_uid)) THEN
        RAISE EXCEPTION 'assistant % not found', p_agent_slug USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    INSERT INTO yuxi.lg_threads (thread_id, uid, metadata)
    VALUES (v_id, p_uid, coalesce(p_metadata, '{}'))
    ON CONFLICT (thread_id) DO NOTHING;
    IF NOT FOUND OR EXISTS (SELECT 1 FROM yuxi.conversations WHERE thread_id = v_id) THEN
        SELECT uid INTO v_owner FROM yuxi.conversations WHERE thread_id = v_id AND status = 'active';
        IF v_owner IS NULL THEN
            SELECT uid INTO v_owner FROM yuxi.lg_threads WHERE thread_id = v_id AND NOT deleted;
        END IF;
        IF p_if_exists = 'do_nothing' AND v_owner = p_uid THEN
            RETURN v_id;
        END IF;
        RAISE EXCEPTION 'thread % already exists', v_id USING ERRCODE = 'YG001', HINT = 'thread_exists';
    END IF;
    IF p_agent_slug IS NOT NULL THEN
        PERFORM yuxi.lg_thread_bind(p_uid, v_id, p_agent_slug);
    END IF;
    RETURN v_id;
END;
$$;
COMMENT ON FUNCTION yuxi.lg_thread_create(uuid, uuid, jsonb, text, text) IS
    'LangGraph API: creates a thread, bound to p_agent_slug when given; returns its id. Raises invalid_input (YV001), not_found (YN001), thread_exists (YG001)';

-- Binds the caller's thread to an agent: an unbound thread gets its conversation (same
-- id, no project: the user's default workspace); a bound one must already be bound to
-- that agent. Returns the conversation, locked.
CREATE FUNCTION yuxi.lg_thread_bind(p_uid uuid, p_thread_id uuid, p_agent_slug text)
RETURNS yuxi.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
BEGIN
    PERFORM 1 FROM yuxi.lg_threads WHERE thread_id = p_thread_id AND uid = p_uid AND NOT deleted
    FOR UPDATE;
    IF NOT EXISTS (SELECT 1 FROM yuxi.conversations WHERE thread_id = p_thread_id) THEN
        IF NOT FOUND THEN
            RAISE EXCEPTION 'thread % not found', p_thread_id USING ERRCODE = 'YN001', HINT = 'not_found';
        END IF;
        IF NOT EXISTS (SELECT 1 FROM yuxi.agents WHERE slug = p_agent_slug AND NOT is_subagent
                       AND yuxi.agent_visible_to(p_agent_slug, p_uid)) THEN
            RAISE EXCEPTION 'assistant % not found', p_agent_slug USING ERRCODE = 'YN001', HINT = 'not_found';
        END IF;
        INSERT INTO yuxi.conversations (thread_id, uid, agent_slug) VALUES (p_thread_id, p_uid, p_agent_slug);
    END IF;
    v_conv := yuxi.thread_lock(p_uid, p_thread_id);
    IF v_conv.agent_slug <> p_agent_slug THEN
        RAISE EXCEPTION 'thread % runs assistant %, not %', p_thread_id, v_conv.agent_slug, p_agent_slug
            USING ERRCODE = 'YG002', HINT = 'assistant_mismatch';
    END IF;
    RETURN v_conv;
END;
$$;
COMMENT ON FUNCTION yuxi.lg_thread_bind(uuid, uuid, text) IS
    'LangGraph API: binds the caller''s thread to an agent (creating its conversation) or checks the agent it is bound to; returns the conversation locked. Raises not_found (YN001), assistant_mismatch (YG002)';

-- The caller's live threads of either kind: unbound ones (agent NULL) and conversations,
-- with their metadata and the thread's queue state.
CREATE FUNCTION yuxi.lg_thread_list(p_uid uuid, p_thread_id uuid DEFAULT NULL)
RETURNS TABLE (thread_id uuid, agent_slug text, metadata jsonb, created_at timestamptz,
               updated_at timestamptz, queue_status text, last_run_status text)
LANGUAGE sql STABLE AS $$
    SELECT c.thread_id, c.agent_slug, coalesce(l.metadata, '{}'), coalesce(l.created_at, c.created_at),
           greatest(c.updated_at, l.updated_at), q.status, q.last_run_status
    FROM yuxi.conversations c
    JOIN yuxi.thread_queues q ON q.thread_id = c.thread_id
    LEFT JOIN yuxi.lg_threads l ON l.thread_id = c.thread_id
    WHERE c.uid = p_uid AND c.status = 'active' AND (p_thread_id IS NULL OR c.thread_id = p_thread_id)
      AND yuxi.agent_visible_to(c.agent_slug, c.uid)
    UNION ALL
    SELECT l.thread_id, NULL, l.metadata, l.created_at, l.updated_at, 'ready', NULL
    FROM yuxi.lg_threads l
    WHERE l.uid = p_uid AND NOT l.deleted AND (p_thread_id IS NULL OR l.thread_id = p_thread_id)
      AND NOT EXISTS (SELECT 1 FROM yuxi.conversations c WHERE c.thread_id = l.thread_id)
$$;
COMMENT ON FUNCTION yuxi.lg_thread_list(uuid, uuid) IS
    'LangGraph API: the caller''s live threads (or one), bound or not, with metadata and queue state';

-- Merges p_metadata into the caller's thread's metadata (a conversation created by the
-- native API gets its row here on its first patch). Returns the thread id.
CREATE FUNCTION yuxi.lg_thread_patch(p_uid uuid, p_thread_id uuid, p_metadata jsonb) RETURNS uuid
LANGUAGE plpgsql AS $$
BEGIN
    IF jsonb_typeof(coalesce(p_metadata, '{}')) <> 'object' THEN
        RAISE EXCEPTION 'metadata must be an object' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM yuxi.lg_thread_list(p_uid, p_thread_id)) THEN
        RAISE EXCEPTION 'thread % not found', p_thread_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    INSERT INTO yuxi.lg_threads (thread_id, uid, metadata) VALUES (p_thread_id, p_uid, coalesce(p_metadata, '{}'))
    ON CONFLICT (thread_id) DO UPDATE
    SET metadata = yuxi.lg_threads.metadata || excluded.metadata, updated_at = clock_timestamp();
    RETURN p_thread_id;
END;
$$;
COMMENT ON FUNCTION yuxi.lg_thread_patch(uuid, uuid, jsonb) IS
    'LangGraph API: merges metadata into the caller''s thread. Raises invalid_input (YV001), not_found (YN001)';

-- Deletes the caller's thread: a conversation through yuxi.thread_delete (its queue is
-- cancelled), an unbound thread by marking it deleted.
CREATE FUNCTION yuxi.lg_thread_delete(p_uid uuid, p_thread_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM yuxi.conversations WHERE thread_id = p_thread_id) THEN
        PERFORM yuxi.thread_delete(p_uid, p_thread_id);
    ELSIF NOT EXISTS (SELECT 1 FROM yuxi.lg_threads
                      WHERE thread_id = p_thread_id AND uid = p_uid AND NOT deleted) THEN
        RAISE EXCEPTION 'thread % not found', p_thread_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    UPDATE yuxi.lg_threads SET deleted = true, updated_at = clock_timestamp()
    WHERE thread_id = p_thread_id AND uid = p_uid;
END;
$$;
COMMENT ON FUNCTION yuxi.lg_thread_delete(uuid, uuid) IS
    'LangGraph API: deletes the caller''s thread, bound or not. Raises not_found (YN001)';

-- A LangGraph run on a bound thread, under the conversation lock. A backlog paused by a
-- failed or cancelled run is continued first (a LangGraph client has no "continue").
-- The strategies: enqueue (the queue's own), reject (run_busy when a run is active or
-- requests wait; nothing is stored), interrupt (while a run is active: the request
-- becomes the queue's head as a steer, a pending interrupt request it replaces is
-- cancelled, and the active run is cancelled; when that run settles and pauses the
-- backlog, yuxi.lg_interrupt_continue continues it with this request).
CREATE FUNCTION yuxi.lg_run_submit(
    p_uid uuid, p_thread_id uuid, p_query text, p_request_id text, p_strategy text,
    p_model_spec text DEFAULT NULL, p_tool_approval_mode text DEFAULT NULL,
    p_metadata jsonb DEFAULT '{}', p_stream_modes text[] DEFAULT '{}',
    p_configurable jsonb DEFAULT '{}'
) RETURNS yuxi.request_info
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
    v_last yuxi.agent_runs;
    v_busy boolean;
    v_info yuxi.request_info;
BEGIN
    IF p_strategy IS NULL OR p_strategy NOT IN ('enqueue', 'reject', 'interrupt') THEN
        RAISE EXCEPTION 'multitask_strategy must be enqueue, reject or interrupt, not %', coalesce(p_strategy, 'null')
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_request_id IS NULL THEN
        RAISE EXCEPTION 'a run id is required' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    PERFORM yuxi.request_check_input(p_query, p_request_id, 'enqueue', p_tool_approval_mode, 'api');
    v_conv := yuxi.thread_lock(p_uid, p_thread_id);
    IF EXISTS (SELECT 1 FROM yuxi.agent_run_requests WHERE request_id = p_request_id) THEN
        RAISE EXCEPTION 'run id % is already used', p_request_id
            USING ERRCODE = 'YQ001', HINT = 'request_id_conflict';
    END IF;
    SELECT * INTO v_last FROM yuxi.agent_runs WHERE run_id = v_conv.last_run_id;
    IF v_last.status = 'interrupted' THEN
        RAISE EXCEPTION 'thread % is waiting for run % to be resumed', p_thread_id, v_last.run_id
            USING ERRCODE = 'YQ002', HINT = 'run_interrupted';
    END IF;
    v_busy := coalesce(yuxi.run_is_active(v_last.status), false);
    IF NOT v_busy AND v_conv.paused_by_run_id IS NOT NULL THEN
        UPDATE yuxi.conversations SET paused_by_run_id = NULL WHERE thread_id = p_thread_id;
        PERFORM yuxi.thread_dispatch_head(v_conv);
        SELECT * INTO v_conv FROM yuxi.conversations WHERE thread_id = p_thread_id;
        SELECT * INTO v_last FROM yuxi.agent_runs WHERE run_id = v_conv.last_run_id;
        v_busy := coalesce(yuxi.run_is_active(v_last.status), false);
    END IF;

    IF p_strategy = 'reject' AND (v_busy OR EXISTS (
            SELECT 1 FROM yuxi.agent_run_requests WHERE thread_id = p_thread_id AND status = 'queued')) THEN
        RAISE EXCEPTION 'thread % is busy; the run was rejected', p_thread_id
            USING ERRCODE = 'YQ003', HINT = 'run_busy';
    END IF;
    IF p_strategy = 'interrupt' AND v_busy THEN
        -- a newer interrupt replaces a pending one at the head
        UPDATE yuxi.messages m SET delivery_status = 'cancelled'
        FROM yuxi.agent_run_requests r
        WHERE r.thread_id = p_thread_id AND r.status = 'queued' AND r.queue_policy = 'steer'
          AND m.id = r.input_message_id;
        UPDATE yuxi.agent_run_requests SET status = 'cancelled', updated_at = clock_timestamp()
        WHERE thread_id = p_thread_id AND status = 'queued' AND queue_policy = 'steer';
        v_info := yuxi.request_submit_locked(v_conv, p_request_id, p_query, 'steer', p_model_spec,
                                             p_tool_approval_mode, 'api', p_configurable);
        INSERT INTO yuxi.lg_interrupts (run_id, request_id) VALUES (v_last.run_id, p_request_id)
        ON CONFLICT (run_id) DO UPDATE SET request_id = excluded.request_id;
        PERFORM yuxi.run_request_cancel(v_last.run_id, NULL);
    ELSE
        v_info := yuxi.request_submit_locked(v_conv, p_request_id, p_query, 'enqueue', p_model_spec,
                                             p_tool_approval_mode, 'api', p_configurable);
    END IF;
    INSERT INTO yuxi.lg_runs (request_id, metadata, multitask_strategy, stream_modes)
    VALUES (p_request_id, coalesce(p_metadata, '{}'), p_strategy, coalesce(p_stream_modes, '{}'));
    RETURN yuxi.request_view(p_request_id);
END;
$$;
COMMENT ON FUNCTION yuxi.lg_run_submit(uuid, uuid, text, text, text, text, text, jsonb, text[], jsonb) IS
    'LangGraph API: submits a run with a multitask strategy (enqueue, reject, interrupt), continuing a paused backlog first; p_configurable: the client''s own config.configurable keys, for the graph. Raises invalid_input (YV001), not_found (YN001), request_id_conflict (YQ001), run_interrupted (YQ002), run_busy (YQ003)';

-- Records a LangGraph run's metadata for a request made another way (a resume).
CREATE FUNCTION yuxi.lg_run_record(
    p_request_id text, p_metadata jsonb, p_strategy text, p_stream_modes text[]
) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO yuxi.lg_runs (request_id, metadata, multitask_strategy, stream_modes)
    VALUES (p_request_id, coalesce(p_metadata, '{}'), p_strategy, coalesce(p_stream_modes, '{}'))
    ON CONFLICT (request_id) DO NOTHING
$$;
COMMENT ON FUNCTION yuxi.lg_run_record(text, jsonb, text, text[]) IS
    'LangGraph API: records the metadata, strategy and stream modes of a request (once)';

-- The LangGraph runs of the caller's thread, newest first: every request but rejected
-- ones, with its run (NULL while queued) and what lg_runs holds.
CREATE FUNCTION yuxi.lg_thread_runs(p_uid uuid, p_thread_id uuid, p_request_id text DEFAULT NULL)
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

-- Trigger: a backlog paused by a run the interrupt strategy cancelled is continued at
-- once; its head is the request that interrupted the run.
CREATE FUNCTION yuxi.lg_interrupt_continue() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
BEGIN
    IF EXISTS (SELECT 1 FROM yuxi.lg_interrupts WHERE run_id = NEW.paused_by_run_id) THEN
        UPDATE yuxi.conversations SET paused_by_run_id = NULL
        WHERE thread_id = NEW.thread_id
        RETURNING * INTO v_conv;
        PERFORM yuxi.thread_dispatch_head(v_conv);
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION yuxi.lg_interrupt_continue() IS
    'Trigger: continues a backlog paused by a run that the interrupt multitask strategy cancelled';

CREATE TRIGGER lg_interrupt_continue
    AFTER UPDATE OF paused_by_run_id ON yuxi.conversations
    FOR EACH ROW
    WHEN (NEW.paused_by_run_id IS NOT NULL AND NEW.paused_by_run_id IS DISTINCT FROM OLD.paused_by_run_id)
    EXECUTE FUNCTION yuxi.lg_interrupt_continue();

-- Stateless runs (POST /runs, /runs/stream, /runs/wait): each runs on a thread of its
-- own, created for it and, with on_completion "delete" (the default), deleted once its
-- runs have ended (by the API at the end of a stream or wait, else by maintenance).
CREATE FUNCTION yuxi.lg_thread_set_temporary(p_uid uuid, p_thread_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE yuxi.lg_threads SET temporary = true, updated_at = clock_timestamp()
    WHERE thread_id = p_thread_id AND uid = p_uid AND NOT deleted;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'thread % not found', p_thread_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.lg_thread_set_temporary(uuid, uuid) IS
    'LangGraph API: marks the caller''s thread as a stateless run''s, deleted once its runs have ended. Raises not_found (YN001)';

-- Deletes temporary threads whose runs have all ended (none active, no request queued),
-- oldest first, each under its conversation's lock (yuxi.thread_delete); how many.
CREATE FUNCTION yuxi.lg_temporary_sweep(p_limit integer DEFAULT 100) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_thread yuxi.lg_threads;
    v_count integer := 0;
BEGIN
    FOR v_thread IN
        SELECT t.* FROM yuxi.lg_threads t
        WHERE t.temporary AND NOT t.deleted
          AND NOT EXISTS (SELECT 1 FROM yuxi.agent_run_requests r
                          WHERE r.thread_id = t.thread_id AND r.status = 'queued')
          AND NOT EXISTS (SELECT 1 FROM yuxi.agent_runs ar
                          WHERE ar.thread_id = t.thread_id AND yuxi.run_is_active(ar.status))
        ORDER BY t.updated_at
        LIMIT p_limit
        FOR UPDATE OF t SKIP LOCKED  -- two sweeps never delete one thread twice
    LOOP
        PERFORM yuxi.lg_thread_delete(v_thread.uid, v_thread.thread_id);
        v_count := v_count + 1;
    END LOOP;
    RETURN v_count;
END;
$$;
COMMENT ON FUNCTION yuxi.lg_temporary_sweep(integer) IS
    'Maintenance: deletes the threads of stateless runs whose runs have all ended; how many';

-- The assistants of p_uid (or the one named p_slug): the live, non-subagent agents they
-- may see, with their version and metadata.
CREATE FUNCTION yuxi.lg_assistants(p_uid uuid, p_slug text DEFAULT NULL)
RETURNS TABLE (slug text, name text, description text, backend_id text, config_json jsonb,
               metadata jsonb, version integer, created_at timestamptz, updated_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT a.slug, a.name, a.description, a.backend_id, a.config_json, a.metadata, a.version,
           a.created_at, a.updated_at
    FROM yuxi.agents a
    WHERE a.deleted_at IS NULL AND NOT a.is_subagent AND (p_slug IS NULL OR a.slug = p_slug)
      AND yuxi.agent_visible_to(a.slug, p_uid)
    ORDER BY a.slug
$$;
COMMENT ON FUNCTION yuxi.lg_assistants(uuid, text) IS
    'LangGraph API: the assistants a user may see (live, non-subagent agents), or one of them, with version and metadata';

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
