-- yuxi: requests, the per-conversation FIFO queue: submitting, steering, cancelling,
-- reading. Conventions (error codes, lock order, p_uid, p_now): 00_vocabulary.sql.
--
-- The small helpers on the submit path are PL/pgSQL rather than SQL: a SQL function
-- that PostgreSQL cannot inline into its caller (it reads tables, or is called from
-- PL/pgSQL) is parsed and planned again on every call before PostgreSQL 18, PL/pgSQL
-- keeps its plans for the session (request_view, called by every submit, 84 µs per call
-- as SQL against 8.5 µs as PL/pgSQL on PostgreSQL 15).

-- 1-based place in the thread's queue (a pending steer first, then created_at, id);
-- NULL once the request has left the queue.
CREATE FUNCTION yuxi.request_queue_position(p_req yuxi.agent_run_requests)
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
COMMENT ON FUNCTION yuxi.request_queue_position(yuxi.agent_run_requests) IS
    'Internal: the 1-based queue position of a request row (a pending steer first), NULL once it left the queue';

-- The request view of any request, without an owner check (NULL for an unknown id).
CREATE FUNCTION yuxi.request_view(p_request_id text) RETURNS yuxi.request_info
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
COMMENT ON FUNCTION yuxi.request_view(text) IS
    'Internal: the request view of any request, without an owner check (NULL fields for an unknown id); prefer yuxi.request_get';

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
COMMENT ON FUNCTION yuxi.request_get(text, uuid) IS
    'The request view for its owner (p_uid) or an operator (NULL). Raises not_found (YN001)';

-- The checks of yuxi.request_submit that need no lock: each raises invalid_input.
CREATE FUNCTION yuxi.request_check_input(
    p_query text, p_request_id text, p_queue_policy text, p_tool_approval_mode text, p_source text
) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
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
    IF p_request_id IS NOT NULL AND NOT yuxi.request_id_is_valid(p_request_id) THEN
        RAISE EXCEPTION 'request_id must be 1-128 characters of letters, digits and . _ : - (starting with a letter or digit)'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_source IS NULL OR p_source NOT IN ('api', 'schedule', 'psql') THEN
        RAISE EXCEPTION 'source must be api, schedule or psql, not %', coalesce(p_source, 'null')
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.request_check_input(text, text, text, text, text) IS
    'Internal: the checks of yuxi.request_submit that need no lock. Raises invalid_input (YV001)';

-- The model a run uses, the first of: the request's explicit value, the conversation's
-- saved value, the agent's config (context.model), the model inherited from a parent
-- run, the system default. Intake passes the first three (a request: explicit, then
-- saved, then agent); a subagent run passes its agent's config and its parent's model
-- (agent, then parent). Empty strings count as unset, except a saved value (only an
-- explicit non-empty value is ever saved).
CREATE FUNCTION yuxi.model_resolve(
    p_agent_config jsonb, p_explicit text DEFAULT NULL, p_saved text DEFAULT NULL,
    p_inherited text DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce(nullif(p_explicit, ''), p_saved,
                    nullif(p_agent_config #>> '{context,model}', ''), p_inherited,
                    (SELECT value FROM yuxi.system_settings WHERE key = 'default_model'));
END;
$$;
COMMENT ON FUNCTION yuxi.model_resolve(jsonb, text, text, text) IS
    'Internal: the model a run uses, the first of: explicit value, saved value, agent config (context.model), inherited value, system default';

-- A submitted request's input_payload, {model_spec, tool_approval_mode}, resolved once
-- at intake and copied to its run. The approval mode: the request's value, the agent's
-- config, the system default, auto.
CREATE FUNCTION yuxi.request_input(
    p_conv yuxi.conversations, p_model_spec text, p_tool_approval_mode text
) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_config jsonb;
BEGIN
    SELECT config_json INTO v_config FROM yuxi.agents WHERE slug = p_conv.agent_slug;
    RETURN jsonb_build_object(
        'model_spec', yuxi.model_resolve(v_config, p_model_spec, p_conv.model_spec),
        'tool_approval_mode', coalesce(
            p_tool_approval_mode,
            nullif(v_config #>> '{context,tool_approval_mode}', ''),
            (SELECT value FROM yuxi.system_settings WHERE key = 'default_tool_approval_mode'),
            'auto'));
END;
$$;
COMMENT ON FUNCTION yuxi.request_input(yuxi.conversations, text, text) IS
    'Internal: the input_payload {model_spec, tool_approval_mode} of a request submitted to the locked conversation p_conv';

-- The one submit path, for the API, the scheduler and psql alike: input checks, the
-- conversation lock, idempotency, then yuxi.request_submit_locked.
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
    v_existing yuxi.agent_run_requests;
BEGIN
    PERFORM yuxi.request_check_input(p_query, p_request_id, p_queue_policy, p_tool_approval_mode,
                                     p_source);
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
    END IF;
    RETURN yuxi.request_submit_locked(v_conv, coalesce(p_request_id, gen_random_uuid()::text),
                                      p_query, p_queue_policy, p_model_spec, p_tool_approval_mode,
                                      p_source);
END;
$$;
COMMENT ON FUNCTION yuxi.request_submit(uuid, uuid, text, text, text, text, text, text) IS
    'The one submit path: stores a user message as a request in the thread''s queue and dispatches it when the thread is idle; a re-sent request_id returns the request as it is. Raises invalid_input (YV001), not_found (YN001), request_id_conflict (YQ001), run_interrupted (YQ002), steer_already_pending (YQ007), run_not_steerable (YQ008)';

-- The locked core of yuxi.request_submit: p_conv is locked and p_request_id is new.
-- Decides from the thread's state what becomes of the request, then writes the user
-- message, the request and, when the thread is idle with nothing queued, the run that
-- serves it at once.
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
                   AND yuxi.run_is_active(status)) THEN
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
COMMENT ON FUNCTION yuxi.request_steer(text, uuid) IS
    'Upgrades a queued enqueue request to steer (runs next, same identity). Raises not_found (YN001), request_already_dispatched (YQ006), steer_already_pending (YQ007), run_not_steerable (YQ008)';

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
COMMENT ON FUNCTION yuxi.request_cancel(text, uuid) IS
    'Cancels a queued request (un-pausing a backlog left empty); returns the request view. Raises not_found (YN001), request_already_dispatched (YQ006)';

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
COMMENT ON FUNCTION yuxi.thread_requests(uuid, uuid) IS
    'The requests of the user''s thread, oldest first, as request views';

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
           OR NOT yuxi.run_is_final(ar.status))
    ORDER BY r.status = 'queued', yuxi.request_queue_position(r),
             coalesce(ar.created_at, r.created_at), r.id
$$;
COMMENT ON FUNCTION yuxi.thread_queue_requests(uuid, boolean) IS
    'Operators: a thread''s requests in dispatch order with positions, run status and text; without p_all only queued ones and those whose run is not final';
