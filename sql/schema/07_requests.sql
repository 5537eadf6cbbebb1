CREATE OR REPLACE FUNCTION yuxi.request_queue_position(p_req yuxi.agent_run_requests)
RETURNS integer
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_req.status <> 'queued' THEN
        RETURN NULL;
    ELSIF p_req.queue_policy = 'steer' THEN
        RETURN 1;
    END IF;
    RETURN 1 + (SELECT count(*)::integer FROM yuxi.agent_run_requests q
                WHERE q.thread_id = p_req.thread_id AND q.status = 'queued'
                  AND (q.queue_policy = 'steer'
                       OR (q.created_at, q.id) < (p_req.created_at, p_req.id)));
END;
$$;

CREATE OR REPLACE FUNCTION yuxi.request_view(p_request_id text) RETURNS yuxi.request_info
LANGUAGE plpgsql STABLE AS $$
DECLARE
    r yuxi.agent_run_requests;
BEGIN
    SELECT * INTO r FROM yuxi.agent_run_requests WHERE request_id = p_request_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN (r.request_id, r.thread_id, r.status, r.queue_policy,
            yuxi.request_queue_position(r), r.input_message_id, r.dispatched_run_id,
            r.created_at)::yuxi.request_info;
END;
$$;

-- The request view for its owner (p_uid) or an operator (NULL); not_found otherwise.
CREATE FUNCTION yuxi.request_get(p_request_id text, p_uid uuid DEFAULT NULL) RETURNS yuxi.request_info
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM yuxi.agent_run_requests
                   WHERE request_id = p_request_id AND (p_uid IS NULL OR uid = p_uid)) THEN
        RAISE EXCEPTION 'request % not found', p_request_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN yuxi.request_view(p_request_id);
END;
$$;

-- The one submit path, for the API, the scheduler and psql alike.
CREATE FUNCTION yuxi.request_submit(
    p_uid                 uuid,
    p_thread_id           uuid,
    p_query               text,
    p_request_id          text DEFAULT NULL,
    p_queue_policy        text DEFAULT 'enqueue',
    p_model_spec          text DEFAULT NULL,
    p_tool_approval_mode  text DEFAULT NULL,
    p_source              text DEFAULT 'api'
) RETURNS yuxi.request_info
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
    v_agent yuxi.agents;
    v_existing yuxi.agent_run_requests;
    v_last_status text;
    v_busy boolean;
    v_backlog boolean;
    v_status text := 'queued';
    v_model text;
    v_mode text;
    v_msg_id bigint;
    v_run_id uuid;
    v_created_at timestamptz;
BEGIN
    IF p_queue_policy IS NULL OR p_queue_policy NOT IN ('enqueue', 'reject', 'steer') THEN
        RAISE EXCEPTION 'queue_policy must be enqueue, reject or steer, not %', coalesce(p_queue_policy, 'null')
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_query IS NULL OR p_query ~ '^[[:space:]]*$' THEN
        RAISE EXCEPTION 'query must not be empty' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_tool_approval_mode IS NOT NULL AND p_tool_approval_mode NOT IN ('auto', 'ask') THEN
        RAISE EXCEPTION 'tool_approval_mode must be auto or ask, not %', p_tool_approval_mode
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_request_id IS NOT NULL AND p_request_id !~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$' THEN
        RAISE EXCEPTION 'request_id must be 1-128 characters of letters, digits and . _ : - (starting with a letter or digit)'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_source IS NULL OR p_source NOT IN ('api', 'schedule', 'psql') THEN
        RAISE EXCEPTION 'source must be api, schedule or psql, not %', coalesce(p_source, 'null')
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;

    v_conv := yuxi.thread_lock(p_uid, p_thread_id);

    -- Idempotency first: a re-sent request is returned as it is now, whatever the
    -- thread's state, and is never delivered twice.
    IF p_request_id IS NOT NULL THEN
        SELECT * INTO v_existing FROM yuxi.agent_run_requests WHERE request_id = p_request_id;
        IF FOUND THEN
            IF v_existing.thread_id <> v_conv.thread_id OR v_existing.uid <> v_conv.uid
               OR v_existing.source = 'resume' THEN
                RAISE EXCEPTION 'request_id % is already used for another request', p_request_id
                    USING ERRCODE = 'YQ001', HINT = 'request_id_conflict';
            END IF;
            RETURN yuxi.request_view(p_request_id);
        END IF;
    ELSE
        p_request_id := gen_random_uuid()::text;
    END IF;

    SELECT status INTO v_last_status FROM yuxi.agent_runs WHERE run_id = v_conv.last_run_id;
    IF v_last_status = 'interrupted' THEN
        RAISE EXCEPTION 'thread % is waiting for run % to be resumed', p_thread_id, v_conv.last_run_id
            USING ERRCODE = 'YQ002', HINT = 'run_interrupted';
    END IF;
    v_busy := coalesce(v_last_status IN ('pending', 'running', 'cancel_requested'), false);
    v_backlog := EXISTS (SELECT 1 FROM yuxi.agent_run_requests
                         WHERE thread_id = p_thread_id AND status = 'queued');

    IF p_queue_policy = 'reject' AND (v_busy OR v_backlog OR v_conv.paused_by_run_id IS NOT NULL) THEN
        v_status := 'rejected';
    ELSIF p_queue_policy = 'steer' AND NOT v_busy AND v_conv.paused_by_run_id IS NOT NULL THEN
        RAISE EXCEPTION 'thread %''s backlog is paused by run %; continue or cancel it before steering',
            p_thread_id, v_conv.paused_by_run_id
            USING ERRCODE = 'YQ008', HINT = 'run_not_steerable';
    ELSIF p_queue_policy = 'steer' AND EXISTS (
            SELECT 1 FROM yuxi.agent_run_requests
            WHERE thread_id = p_thread_id AND status = 'queued' AND queue_policy = 'steer') THEN
        RAISE EXCEPTION 'thread % already has a pending steer request', p_thread_id
            USING ERRCODE = 'YQ007', HINT = 'steer_already_pending';
    END IF;

    -- Model resolution: request value, conversation's saved value, agent config, default.
    SELECT * INTO v_agent FROM yuxi.agents WHERE slug = v_conv.agent_slug;
    v_model := coalesce(nullif(p_model_spec, ''), v_conv.model_spec,
                        nullif(v_agent.config_json #>> '{context,model}', ''),
                        (SELECT value FROM yuxi.system_settings WHERE key = 'default_model'));
    v_mode := coalesce(p_tool_approval_mode,
                       nullif(v_agent.config_json #>> '{context,tool_approval_mode}', ''),
                       (SELECT value FROM yuxi.system_settings WHERE key = 'default_tool_approval_mode'),
                       'auto');

    -- An idle thread with nothing queued dispatches this request at once: it is the head.
    -- Its rows are written dispatched from the start, each once.
    IF v_status = 'queued' AND NOT v_busy AND NOT v_backlog AND v_conv.paused_by_run_id IS NULL THEN
        v_status := 'dispatched';
        v_run_id := gen_random_uuid();
    END IF;

    v_msg_id := nextval('yuxi.messages_id_seq');
    -- ON CONFLICT: the same request_id racing in on another thread or user (this
    -- thread's submits are serialised by the conversation lock).
    INSERT INTO yuxi.agent_run_requests (request_id, uid, thread_id, source, queue_policy, status,
                                         input_message_id, dispatched_run_id, input_payload)
    VALUES (p_request_id, v_conv.uid, p_thread_id, p_source, p_queue_policy, v_status, v_msg_id,
            v_run_id, jsonb_build_object('model_spec', v_model, 'tool_approval_mode', v_mode))
    ON CONFLICT (request_id) DO NOTHING
    RETURNING created_at INTO v_created_at;
    IF v_created_at IS NULL THEN
        RAISE EXCEPTION 'request_id % is already used for another request', p_request_id
            USING ERRCODE = 'YQ001', HINT = 'request_id_conflict';
    END IF;
    INSERT INTO yuxi.messages (id, thread_id, role, content, request_id, delivery_status, run_id)
    VALUES (v_msg_id, p_thread_id, 'user', p_query, p_request_id,
            CASE v_status WHEN 'queued' THEN 'queued' WHEN 'rejected' THEN 'rejected' ELSE 'dispatched' END,
            v_run_id);
    IF v_run_id IS NOT NULL THEN
        INSERT INTO yuxi.agent_runs (run_id, thread_id, uid, agent_slug, request_id, run_type,
                                     input_message_id, input_payload, delivery_job_id)
        VALUES (v_run_id, p_thread_id, v_conv.uid, v_conv.agent_slug, p_request_id, 'chat', v_msg_id,
                jsonb_build_object('model_spec', v_model, 'tool_approval_mode', v_mode),
                yuxi.run_delivery_job(v_run_id, true));
    END IF;

    UPDATE yuxi.conversations
    SET model_spec = coalesce(nullif(p_model_spec, ''), model_spec),
        last_run_id = coalesce(v_run_id, last_run_id), updated_at = clock_timestamp()
    WHERE thread_id = p_thread_id;

    IF v_status = 'queued' AND NOT v_busy AND v_conv.paused_by_run_id IS NULL THEN
        -- a stalled backlog (idle, unpaused, yet queued; only reachable by hand): its
        -- oldest request goes first
        PERFORM yuxi.thread_dispatch_head(v_conv);
        RETURN yuxi.request_view(p_request_id);
    END IF;
    RETURN ROW(p_request_id, p_thread_id, v_status, p_queue_policy,
               CASE WHEN v_status = 'queued'
                    THEN yuxi.request_queue_position(
                             (SELECT r FROM yuxi.agent_run_requests r WHERE r.request_id = p_request_id))
               END,
               v_msg_id, v_run_id, v_created_at)::yuxi.request_info;
END;
$$;

-- Upgrades a queued enqueue request to steer: same identity, runs next.
CREATE FUNCTION yuxi.request_steer(p_request_id text, p_uid uuid DEFAULT NULL) RETURNS yuxi.request_info
LANGUAGE plpgsql AS $$
DECLARE
    v_req yuxi.agent_run_requests;
    v_conv yuxi.conversations;
BEGIN
    SELECT * INTO v_req FROM yuxi.agent_run_requests
    WHERE request_id = p_request_id AND (p_uid IS NULL OR uid = p_uid);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'request % not found', p_request_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    v_conv := yuxi.thread_lock(p_uid, v_req.thread_id);
    SELECT * INTO v_req FROM yuxi.agent_run_requests WHERE request_id = p_request_id FOR UPDATE;

    IF v_req.status = 'dispatched' THEN
        RAISE EXCEPTION 'request % is already dispatched as run %', p_request_id, v_req.dispatched_run_id
            USING ERRCODE = 'YQ006', HINT = 'request_already_dispatched';
    ELSIF v_req.status <> 'queued' THEN
        RAISE EXCEPTION 'request % is %, not queued', p_request_id, v_req.status
            USING ERRCODE = 'YQ008', HINT = 'run_not_steerable';
    ELSIF v_req.queue_policy = 'steer' THEN
        RETURN yuxi.request_view(p_request_id);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM yuxi.agent_runs WHERE run_id = v_conv.last_run_id
                   AND status IN ('pending', 'running', 'cancel_requested')) THEN
        RAISE EXCEPTION 'no run is active on thread %; steering needs one', v_req.thread_id
            USING ERRCODE = 'YQ008', HINT = 'run_not_steerable';
    END IF;
    IF EXISTS (SELECT 1 FROM yuxi.agent_run_requests
               WHERE thread_id = v_req.thread_id AND status = 'queued' AND queue_policy = 'steer') THEN
        RAISE EXCEPTION 'thread % already has a pending steer request', v_req.thread_id
            USING ERRCODE = 'YQ007', HINT = 'steer_already_pending';
    END IF;
    UPDATE yuxi.agent_run_requests SET queue_policy = 'steer', updated_at = clock_timestamp()
    WHERE request_id = p_request_id;
    RETURN yuxi.request_view(p_request_id);
END;
$$;

-- Cancels a request that is still queued. Cancelling the last queued request of a
-- paused backlog un-pauses the thread: there is nothing left to hold back.
CREATE FUNCTION yuxi.request_cancel(p_request_id text, p_uid uuid DEFAULT NULL) RETURNS yuxi.request_info
LANGUAGE plpgsql AS $$
DECLARE
    v_req yuxi.agent_run_requests;
BEGIN
    SELECT * INTO v_req FROM yuxi.agent_run_requests
    WHERE request_id = p_request_id AND (p_uid IS NULL OR uid = p_uid);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'request % not found', p_request_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    PERFORM yuxi.thread_lock(p_uid, v_req.thread_id);
    SELECT * INTO v_req FROM yuxi.agent_run_requests WHERE request_id = p_request_id FOR UPDATE;

    IF v_req.status = 'dispatched' THEN
        RAISE EXCEPTION 'request % is already dispatched as run %; cancel the run instead',
            p_request_id, v_req.dispatched_run_id
            USING ERRCODE = 'YQ006', HINT = 'request_already_dispatched';
    ELSIF v_req.status = 'queued' THEN
        UPDATE yuxi.agent_run_requests SET status = 'cancelled', updated_at = clock_timestamp()
        WHERE request_id = p_request_id;
        UPDATE yuxi.messages SET delivery_status = 'cancelled' WHERE id = v_req.input_message_id;
        UPDATE yuxi.conversations SET paused_by_run_id = NULL, updated_at = clock_timestamp()
        WHERE thread_id = v_req.thread_id AND paused_by_run_id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM yuxi.agent_run_requests
                          WHERE thread_id = v_req.thread_id AND status = 'queued');
    END IF;
    RETURN yuxi.request_view(p_request_id);
END;
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

-- A thread's requests in dispatch order: those that left the queue in the order they
-- did (a dispatched request by its run's creation, which happens at dispatch), then the
-- queued ones by queue position (a steer first). Without p_all only the requests that
-- still matter: queued ones and those whose run is active or interrupted.
CREATE FUNCTION yuxi.thread_queue_requests(p_thread_id uuid, p_all boolean DEFAULT false)
RETURNS TABLE (request_id text, status text, queue_policy text, queue_position integer,
               source text, run_id uuid, run_status text, query text,
               created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT r.request_id, r.status, r.queue_policy, yuxi.request_queue_position(r), r.source,
           r.dispatched_run_id, ar.status, m.content, r.created_at
    FROM yuxi.agent_run_requests r
    LEFT JOIN yuxi.agent_runs ar ON ar.run_id = r.dispatched_run_id
    LEFT JOIN yuxi.messages m ON m.id = r.input_message_id
    WHERE r.thread_id = p_thread_id
      AND (p_all OR r.status = 'queued'
           OR ar.status IN ('pending', 'running', 'cancel_requested', 'interrupted'))
    ORDER BY r.status = 'queued', yuxi.request_queue_position(r),
             coalesce(ar.created_at, r.created_at), r.id
$$;
