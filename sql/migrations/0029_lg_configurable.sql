-- Open config.configurable for LangGraph clients: keys a client puts in a run's
-- config.configurable that are not the agent's settings (user ids, tenant ids, what
-- RemoteGraph nodes pass on) are kept in the request's input payload ("configurable")
-- and reach the graph's config["configurable"]; they never become Context fields.

DROP FUNCTION yuxi.lg_run_submit(uuid, uuid, text, text, text, text, text, jsonb, text[]);
DROP FUNCTION yuxi.request_submit_locked(yuxi.conversations, text, text, text, text, text, text);

CREATE FUNCTION yuxi.request_submit_locked(
    p_conv yuxi.conversations, p_request_id text, p_query text, p_queue_policy text,
    p_model_spec text, p_tool_approval_mode text, p_source text,
    p_configurable jsonb DEFAULT NULL
) RETURNS yuxi.request_info
LANGUAGE plpgsql AS $$
DECLARE
    v_last_status text;
    v_busy boolean;
    v_backlog boolean;
    v_status text := 'queued';
    v_input jsonb;
    v_msg_id bigint;
    v_run_id uuid;
    v_created_at timestamptz;
BEGIN
    SELECT status INTO v_last_status FROM yuxi.agent_runs WHERE run_id = p_conv.last_run_id;
    IF v_last_status = 'interrupted' THEN
        RAISE EXCEPTION 'thread % is waiting for run % to be resumed', p_conv.thread_id, p_conv.last_run_id
            USING ERRCODE = 'YQ002', HINT = 'run_interrupted';
    END IF;
    v_busy := coalesce(yuxi.run_is_active(v_last_status), false);
    v_backlog := EXISTS (SELECT 1 FROM yuxi.agent_run_requests
                         WHERE thread_id = p_conv.thread_id AND status = 'queued');

    IF p_queue_policy = 'reject' AND (v_busy OR v_backlog OR p_conv.paused_by_run_id IS NOT NULL) THEN
        v_status := 'rejected';
    ELSIF p_queue_policy = 'steer' AND NOT v_busy AND p_conv.paused_by_run_id IS NOT NULL THEN
        RAISE EXCEPTION 'thread %''s backlog is paused by run %; continue or cancel it before steering',
            p_conv.thread_id, p_conv.paused_by_run_id
            USING ERRCODE = 'YQ008', HINT = 'run_not_steerable';
    ELSIF p_queue_policy = 'steer' AND EXISTS (
            SELECT 1 FROM yuxi.agent_run_requests
            WHERE thread_id = p_conv.thread_id AND status = 'queued' AND queue_policy = 'steer') THEN
        RAISE EXCEPTION 'thread % already has a pending steer request', p_conv.thread_id
            USING ERRCODE = 'YQ007', HINT = 'steer_already_pending';
    END IF;

    v_input := yuxi.request_input(p_conv, p_model_spec, p_tool_approval_mode);
    IF p_configurable IS NOT NULL AND p_configurable <> '{}' THEN
        -- a LangGraph client's own config.configurable keys, for the graph's config
        v_input := v_input || jsonb_build_object('configurable', p_configurable);
    END IF;

    -- An idle thread with nothing queued dispatches this request at once: it is the head.
    -- Its rows are written dispatched from the start, each once.
    IF v_status = 'queued' AND NOT v_busy AND NOT v_backlog AND p_conv.paused_by_run_id IS NULL THEN
        v_status := 'dispatched';
        v_run_id := gen_random_uuid();
    END IF;

    v_msg_id := nextval('yuxi.messages_id_seq');
    -- ON CONFLICT: the same request_id racing in on another thread or user (this
    -- thread's submits are serialised by the conversation lock).
    INSERT INTO yuxi.agent_run_requests (request_id, uid, thread_id, source, queue_policy, status,
                                         input_message_id, dispatched_run_id, input_payload)
    VALUES (p_request_id, p_conv.uid, p_conv.thread_id, p_source, p_queue_policy, v_status, v_msg_id,
            v_run_id, v_input)
    ON CONFLICT (request_id) DO NOTHING
    RETURNING created_at INTO v_created_at;
    IF v_created_at IS NULL THEN
        RAISE EXCEPTION 'request_id % is already used for another request', p_request_id
            USING ERRCODE = 'YQ001', HINT = 'request_id_conflict';
    END IF;
    INSERT INTO yuxi.messages (id, thread_id, role, content, request_id, delivery_status, run_id)
    VALUES (v_msg_id, p_conv.thread_id, 'user', p_query, p_request_id,
            CASE v_status WHEN 'queued' THEN 'queued' WHEN 'rejected' THEN 'rejected' ELSE 'dispatched' END,
            v_run_id);
    IF v_run_id IS NOT NULL THEN
        INSERT INTO yuxi.agent_runs (run_id, thread_id, uid, agent_slug, request_id, run_type,
                                     input_message_id, input_payload, delivery_job_id)
        VALUES (v_run_id, p_conv.thread_id, p_conv.uid, p_conv.agent_slug, p_request_id, 'chat', v_msg_id,
                v_input, yuxi.run_delivery_job(v_run_id, true));
    END IF;

    UPDATE yuxi.conversations
    SET model_spec = coalesce(nullif(p_model_spec, ''), model_spec),
        last_run_id = coalesce(v_run_id, last_run_id), updated_at = clock_timestamp()
    WHERE thread_id = p_conv.thread_id;

    IF v_status = 'queued' AND NOT v_busy AND p_conv.paused_by_run_id IS NULL THEN
        -- a stalled backlog (idle, unpaused, yet queued; only reachable by hand): its
        -- oldest request goes first
        PERFORM yuxi.thread_dispatch_head(p_conv);
        RETURN yuxi.request_view(p_request_id);
    END IF;
    RETURN ROW(p_request_id, p_conv.thread_id, v_status, p_queue_policy,
               CASE WHEN v_status = 'queued'
                    THEN yuxi.request_queue_position(
                             (SELECT r FROM yuxi.agent_run_requests r WHERE r.request_id = p_request_id))
               END,
               v_msg_id, v_run_id, v_created_at)::yuxi.request_info;
END;
$$;
COMMENT ON FUNCTION yuxi.request_submit_locked(yuxi.conversations, text, text, text, text, text, text, jsonb) IS
    'Internal: the locked core of yuxi.request_submit (p_conv locked, p_request_id new); p_configurable: keys for the graph''s config.configurable, kept in the input payload. Raises request_id_conflict (YQ001), run_interrupted (YQ002), steer_already_pending (YQ007), run_not_steerable (YQ008)';

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
