-- yuxi: every state change of the queue, as plpgsql functions.
--
-- Error codes (SQLSTATE, mapped to typed errors in yuxi/queue/errors.py; the HINT
-- carries the same name for psql users):
--   YQ001 request_id_conflict        YQ006 request_already_dispatched
--   YQ002 run_interrupted            YQ007 steer_already_pending
--   YQ003 run_busy                   YQ008 run_not_steerable
--   YQ004 resume_superseded          YQ009 queue_not_paused
--   YQ005 run_not_interrupted        YQ010 run_not_claimable
--   YL001 lease_lost                 YM001 manifest_conflict
--   YT001 illegal_transition         YN001 not_found
--   YV001 invalid_input
--
-- Lock order, everywhere: conversation row, then run row. Functions that only touch a
-- run under lease (renew, append events, manifest) lock the run alone.
--
-- Functions taking p_uid accept NULL for "an operator acting as the owner".
-- Functions taking p_now use it for lease arithmetic so tests control the clock;
-- ordering timestamps (created_at) always come from clock_timestamp() taken under the
-- conversation lock, so they follow the order in which the lock was granted.

CREATE TYPE yuxi.request_info AS (
    request_id      text,
    thread_id       uuid,
    status          text,
    queue_policy    text,
    queue_position  integer,
    message_id      bigint,
    run_id          uuid,
    created_at      timestamptz
);

CREATE TYPE yuxi.claimed_run AS (
    run_id             uuid,
    thread_id          uuid,
    uid                uuid,
    agent_slug         text,
    request_id         text,
    run_type           text,
    created_by_run_id  uuid,
    input_message_id   bigint,
    input_payload      jsonb,
    lease_token        uuid,
    lease_expires_at   timestamptz,
    attempt_no         integer,
    started_at         timestamptz,
    manifest_fingerprint text
);

-- ---------------------------------------------------------------------------------
-- Access

-- plpgsql rather than SQL: its plan is cached, which before PostgreSQL 18 halves the
-- cost of every call (it is on the path of every submit and every run).
CREATE FUNCTION yuxi.agent_visible_to(p_slug text, p_uid uuid) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1
        FROM yuxi.agents a
        JOIN yuxi.users u ON u.id = p_uid AND u.deleted_at IS NULL
        WHERE a.slug = p_slug
          AND a.deleted_at IS NULL
          AND (a.share_scope = 'all'
               OR u.is_admin
               OR (a.share_scope = 'selected'
                   AND EXISTS (SELECT 1 FROM yuxi.agent_shares s
                               WHERE s.agent_slug = a.slug AND s.uid = p_uid)))
    );
END;
$$;

-- Locks a live conversation the caller may use. Unknown, deleted and other users'
-- threads are all "not found" so their existence does not leak.
CREATE FUNCTION yuxi.thread_lock(p_uid uuid, p_thread_id uuid) RETURNS yuxi.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
BEGIN
    SELECT * INTO v_conv FROM yuxi.conversations
    WHERE thread_id = p_thread_id AND status = 'active' AND (p_uid IS NULL OR uid = p_uid)
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'thread % not found', p_thread_id
            USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    IF NOT yuxi.agent_visible_to(v_conv.agent_slug, v_conv.uid) THEN
        RAISE EXCEPTION 'agent % of thread % is not available to this user', v_conv.agent_slug, p_thread_id
            USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN v_conv;
END;
$$;

-- ---------------------------------------------------------------------------------
-- Views of requests and queues

-- 1-based place in the thread's queue (a pending steer first, then created_at, id);
-- NULL once the request has left the queue.
CREATE FUNCTION yuxi.request_queue_position(p_req yuxi.agent_run_requests) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN p_req.status <> 'queued' THEN NULL
        WHEN p_req.queue_policy = 'steer' THEN 1
        ELSE 1 + (SELECT count(*)::integer FROM yuxi.agent_run_requests q
                  WHERE q.thread_id = p_req.thread_id AND q.status = 'queued'
                    AND (q.queue_policy = 'steer'
                         OR (q.created_at, q.id) < (p_req.created_at, p_req.id)))
    END
$$;

CREATE FUNCTION yuxi.request_view(p_request_id text) RETURNS yuxi.request_info
LANGUAGE sql STABLE AS $$
    SELECT r.request_id, r.thread_id, r.status, r.queue_policy,
           yuxi.request_queue_position(r), r.input_message_id, r.dispatched_run_id, r.created_at
    FROM yuxi.agent_run_requests r
    WHERE r.request_id = p_request_id
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

-- A run for its owner (p_uid) or an operator (NULL); not_found otherwise.
CREATE FUNCTION yuxi.run_get(p_run_id uuid, p_uid uuid DEFAULT NULL) RETURNS yuxi.agent_runs
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_run yuxi.agent_runs;
BEGIN
    SELECT * INTO v_run FROM yuxi.agent_runs WHERE run_id = p_run_id AND (p_uid IS NULL OR uid = p_uid);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % not found', p_run_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN v_run;
END;
$$;

-- The queue state of every live thread: what an operator looks at first.
-- `stalled` (an idle thread holding a backlog without a pause) is only reachable by
-- hand; thread_continue dispatches it like a paused one.
CREATE VIEW yuxi.thread_queues AS
SELECT q.thread_id,
       q.uid,
       CASE
           WHEN q.busy THEN 'running'
           WHEN q.last_run_status = 'interrupted' THEN 'interrupted'
           WHEN q.paused_by_run_id IS NOT NULL OR q.queued_count > 0 THEN 'paused'
           ELSE 'ready'
       END AS status,
       CASE
           WHEN q.busy THEN NULL
           WHEN q.last_run_status = 'interrupted' THEN 'run_interrupted'
           WHEN q.paused_by_run_id IS NOT NULL THEN 'run_' || q.paused_by_status
           WHEN q.queued_count > 0 THEN 'stalled'
       END AS paused_reason,
       CASE
           WHEN q.busy OR q.last_run_status = 'interrupted' THEN q.last_run_id
           ELSE q.paused_by_run_id
       END AS blocking_run_id,
       (NOT q.busy AND q.last_run_status IS DISTINCT FROM 'interrupted'
        AND (q.paused_by_run_id IS NOT NULL OR q.queued_count > 0)) AS can_continue,
       q.queued_count,
       q.last_run_id,
       q.last_run_status
FROM (
    SELECT c.thread_id, c.uid, c.paused_by_run_id, pr.status AS paused_by_status,
           lr.run_id AS last_run_id, lr.status AS last_run_status,
           coalesce(lr.status IN ('pending', 'running', 'cancel_requested'), false) AS busy,
           (SELECT count(*) FROM yuxi.agent_run_requests r
            WHERE r.thread_id = c.thread_id AND r.status = 'queued') AS queued_count
    FROM yuxi.conversations c
    LEFT JOIN yuxi.agent_runs lr ON lr.run_id = c.last_run_id
    LEFT JOIN yuxi.agent_runs pr ON pr.run_id = c.paused_by_run_id
    WHERE c.status = 'active'
) q;

-- ---------------------------------------------------------------------------------
-- Delivery

-- Inserts the procrastinate job that delivers a run, in the caller's transaction, so a
-- pending run always has exactly one waiting delivery and a rolled-back one has none;
-- returns the job id for the caller to store in agent_runs.delivery_job_id in the same
-- write that makes the run pending (a second write of a fresh row would re-run its
-- foreign-key checks). The queueing lock makes a second waiting delivery of the same
-- run impossible; a delivery still waiting is reused. Callers hold the run row, or are
-- creating it.
CREATE FUNCTION yuxi.run_delivery_job(p_run_id uuid, p_new_run boolean DEFAULT false) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_job_id bigint;
BEGIN
    IF NOT p_new_run THEN
        SELECT id INTO v_job_id FROM public.procrastinate_jobs
        WHERE queueing_lock = 'run:' || p_run_id::text AND status = 'todo';
        IF FOUND THEN
            RETURN v_job_id;
        END IF;
    END IF;
    RETURN (public.procrastinate_defer_jobs_v1(ARRAY[
        ROW('yuxi_runs', 'execute_run', 0, NULL, 'run:' || p_run_id::text,
            jsonb_build_object('run_id', p_run_id::text), NULL)::public.procrastinate_job_to_defer_v1
    ]))[1];
END;
$$;

-- Dispatches the queue head of a thread whose conversation row the caller holds
-- locked, and which has no active run. Returns the new run, or NULL for an empty queue.
CREATE FUNCTION yuxi.thread_dispatch_head(p_conv yuxi.conversations) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_req yuxi.agent_run_requests;
    v_run_id uuid := gen_random_uuid();
BEGIN
    SELECT * INTO v_req FROM yuxi.agent_run_requests
    WHERE thread_id = p_conv.thread_id AND status = 'queued' AND queue_policy = 'steer';
    IF NOT FOUND THEN
        SELECT * INTO v_req FROM yuxi.agent_run_requests
        WHERE thread_id = p_conv.thread_id AND status = 'queued'
        ORDER BY created_at, id
        LIMIT 1;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
    END IF;

    INSERT INTO yuxi.agent_runs (run_id, thread_id, uid, agent_slug, request_id, run_type,
                                 input_message_id, input_payload, delivery_job_id)
    VALUES (v_run_id, p_conv.thread_id, v_req.uid, p_conv.agent_slug, v_req.request_id, 'chat',
            v_req.input_message_id, v_req.input_payload, yuxi.run_delivery_job(v_run_id, true));
    UPDATE yuxi.agent_run_requests
    SET status = 'dispatched', dispatched_run_id = v_run_id, updated_at = clock_timestamp()
    WHERE request_id = v_req.request_id;
    UPDATE yuxi.messages SET delivery_status = 'dispatched', run_id = v_run_id
    WHERE id = v_req.input_message_id;
    UPDATE yuxi.conversations
    SET last_run_id = v_run_id, paused_by_run_id = NULL, updated_at = clock_timestamp()
    WHERE thread_id = p_conv.thread_id;
    RETURN v_run_id;
END;
$$;

-- ---------------------------------------------------------------------------------
-- Intake

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

-- Resumes a backlog paused by a failed or cancelled run: dispatches its head.
CREATE FUNCTION yuxi.thread_continue(p_thread_id uuid, p_uid uuid DEFAULT NULL) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
BEGIN
    v_conv := yuxi.thread_lock(p_uid, p_thread_id);
    IF EXISTS (SELECT 1 FROM yuxi.agent_runs WHERE run_id = v_conv.last_run_id
               AND status IN ('pending', 'running', 'cancel_requested', 'interrupted')) THEN
        RAISE EXCEPTION 'thread % has run % in progress', p_thread_id, v_conv.last_run_id
            USING ERRCODE = 'YQ003', HINT = 'run_busy';
    END IF;
    -- An idle thread with a backlog and no pause is only reachable by hand (e.g. a raw
    -- UPDATE that cancelled a run); continuing it is the way out, so it is allowed.
    IF v_conv.paused_by_run_id IS NULL AND NOT EXISTS (
           SELECT 1 FROM yuxi.agent_run_requests WHERE thread_id = p_thread_id AND status = 'queued') THEN
        RAISE EXCEPTION 'thread %''s backlog is not paused', p_thread_id
            USING ERRCODE = 'YQ009', HINT = 'queue_not_paused';
    END IF;
    UPDATE yuxi.conversations SET paused_by_run_id = NULL WHERE thread_id = p_thread_id;
    RETURN yuxi.thread_dispatch_head(v_conv);
END;
$$;

-- ---------------------------------------------------------------------------------
-- Leases

-- Claims a pending run: a new attempt with a fresh lease token. A duplicate delivery
-- finds the run no longer pending and gets run_not_claimable; nothing runs twice.
CREATE FUNCTION yuxi.run_claim(
    p_run_id uuid, p_worker text, p_lease_seconds double precision, p_now timestamptz DEFAULT NULL
) RETURNS yuxi.claimed_run
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_token uuid := gen_random_uuid();
    v_run yuxi.agent_runs;
    v_status text;
BEGIN
    IF p_lease_seconds IS NULL OR p_lease_seconds <= 0 THEN
        RAISE EXCEPTION 'lease must be positive' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    UPDATE yuxi.agent_runs
    SET status = 'running', lease_token = v_token, lease_owner = p_worker,
        lease_expires_at = v_now + make_interval(secs => p_lease_seconds), heartbeat_at = v_now,
        attempt_count = attempt_count + 1, started_at = coalesce(started_at, v_now), updated_at = v_now
    WHERE run_id = p_run_id AND status = 'pending'
    RETURNING * INTO v_run;
    IF NOT FOUND THEN
        SELECT status INTO v_status FROM yuxi.agent_runs WHERE run_id = p_run_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'run % not found', p_run_id USING ERRCODE = 'YN001', HINT = 'not_found';
        END IF;
        RAISE EXCEPTION 'run % is %, not pending', p_run_id, v_status
            USING ERRCODE = 'YQ010', HINT = 'run_not_claimable';
    END IF;
    INSERT INTO yuxi.agent_run_attempts (run_id, attempt_no, worker, lease_token, started_at)
    VALUES (p_run_id, v_run.attempt_count, p_worker, v_token, v_now);
    RETURN ROW(v_run.run_id, v_run.thread_id, v_run.uid, v_run.agent_slug, v_run.request_id,
               v_run.run_type, v_run.created_by_run_id, v_run.input_message_id, v_run.input_payload,
               v_token, v_run.lease_expires_at, v_run.attempt_count, v_run.started_at,
               v_run.manifest_fingerprint)::yuxi.claimed_run;
END;
$$;

-- Raises lease_lost unless p_token holds an unexpired lease on the locked run p_run.
CREATE FUNCTION yuxi.lease_check(p_run yuxi.agent_runs, p_token uuid, p_now timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_run.status NOT IN ('running', 'cancel_requested') OR p_run.lease_token IS DISTINCT FROM p_token
       OR p_run.lease_expires_at <= p_now THEN
        RAISE EXCEPTION 'lease on run % is lost (run is %)', p_run.run_id, p_run.status
            USING ERRCODE = 'YL001', HINT = 'lease_lost';
    END IF;
END;
$$;

-- Locks a run for its lease holder, or raises lease_lost.
CREATE FUNCTION yuxi.run_lock_leased(p_run_id uuid, p_token uuid, p_now timestamptz)
RETURNS yuxi.agent_runs
LANGUAGE plpgsql AS $$
DECLARE
    v_run yuxi.agent_runs;
BEGIN
    SELECT * INTO v_run FROM yuxi.agent_runs WHERE run_id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % not found', p_run_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    PERFORM yuxi.lease_check(v_run, p_token, p_now);
    RETURN v_run;
END;
$$;

-- Extends the lease. Returns the run's status so the holder learns of a cancel request
-- on the same round trip.
CREATE FUNCTION yuxi.run_renew_lease(
    p_run_id uuid, p_token uuid, p_lease_seconds double precision, p_now timestamptz DEFAULT NULL,
    OUT status text, OUT lease_expires_at timestamptz
)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
BEGIN
    IF p_lease_seconds IS NULL OR p_lease_seconds <= 0 THEN
        RAISE EXCEPTION 'lease must be positive' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    UPDATE yuxi.agent_runs r
    SET lease_expires_at = v_now + make_interval(secs => p_lease_seconds), heartbeat_at = v_now,
        updated_at = v_now
    WHERE r.run_id = p_run_id AND r.lease_token = p_token AND r.lease_expires_at > v_now
      AND r.status IN ('running', 'cancel_requested')
    RETURNING r.status, r.lease_expires_at INTO status, lease_expires_at;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'lease on run % is lost', p_run_id USING ERRCODE = 'YL001', HINT = 'lease_lost';
    END IF;
END;
$$;

-- Appends events ([{event, payload}, ...]) with gap-free seqs; returns the last seq.
-- `end` is written only when the run finishes, so there is exactly one.
-- p_notify => false: the caller sends the yuxi_run_events NOTIFY itself right after
-- commit. PostgreSQL serialises the commits of all transactions that NOTIFY, disk flush
-- included, so the hot paths of a worker notify from a transaction of their own.
CREATE FUNCTION yuxi.run_append_events(
    p_run_id uuid, p_token uuid, p_events jsonb, p_now timestamptz DEFAULT NULL,
    p_notify boolean DEFAULT true
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_count integer;
    v_last bigint;
BEGIN
    IF jsonb_typeof(p_events) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'events must be a JSON array' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_count := jsonb_array_length(p_events);
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(p_events) e WHERE e ->> 'event' = 'end') THEN
        RAISE EXCEPTION 'the end event is written by run_finish' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    -- The row lock taken by this UPDATE serialises appenders of one run.
    UPDATE yuxi.agent_runs
    SET last_event_seq = last_event_seq + v_count
    WHERE run_id = p_run_id AND lease_token = p_token AND lease_expires_at > v_now
      AND status IN ('running', 'cancel_requested')
    RETURNING last_event_seq INTO v_last;
    IF NOT FOUND THEN
        PERFORM yuxi.run_lock_leased(p_run_id, p_token, v_now);  -- raises the precise error
    END IF;
    IF v_count = 0 THEN
        RETURN v_last;
    END IF;
    INSERT INTO yuxi.run_events (run_id, seq, event, payload, created_at)
    SELECT p_run_id, v_last - v_count + e.ord, e.value ->> 'event', coalesce(e.value -> 'payload', '{}'), v_now
    FROM jsonb_array_elements(p_events) WITH ORDINALITY AS e(value, ord);
    IF p_notify THEN
        PERFORM pg_notify('yuxi_run_events', p_run_id::text || ' ' || v_last::text);
    END IF;
    RETURN v_last;
END;
$$;

-- Write-once: the first fingerprint stays; an equal one is accepted (a retry that
-- derived the same manifest); a different one raises and changes nothing.
CREATE FUNCTION yuxi.run_write_manifest(
    p_run_id uuid, p_token uuid, p_manifest jsonb, p_fingerprint text, p_now timestamptz DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_run yuxi.agent_runs;
BEGIN
    IF p_manifest IS NULL OR p_fingerprint IS NULL OR p_fingerprint !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'manifest and a sha-256 hex fingerprint are required'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_run := yuxi.run_lock_leased(p_run_id, p_token, coalesce(p_now, clock_timestamp()));
    IF v_run.manifest_fingerprint IS NULL THEN
        UPDATE yuxi.agent_runs SET manifest = p_manifest, manifest_fingerprint = p_fingerprint
        WHERE run_id = p_run_id;
    ELSIF v_run.manifest_fingerprint <> p_fingerprint THEN
        RAISE EXCEPTION 'run % already has manifest %; this attempt derived %',
            p_run_id, v_run.manifest_fingerprint, p_fingerprint
            USING ERRCODE = 'YM001', HINT = 'manifest_conflict';
    END IF;
    RETURN coalesce(v_run.manifest_fingerprint, p_fingerprint);
END;
$$;

-- ---------------------------------------------------------------------------------
-- Ending runs

-- Everything that follows a run reaching a terminal or interrupted status, in the same
-- transaction: the single `end` event, the input message's delivery status, the run's
-- children, and the thread's queue (dispatch the next request, or pause the backlog).
-- p_run is the run as just updated by the caller, which holds the conversation lock
-- (top-level runs) and the run lock, and reserved the end event's seq by incrementing
-- last_event_seq in that same update. An interrupted run already wrote its `end` when
-- it stopped; cancelling it later only releases the thread (p_was_interrupted).
CREATE FUNCTION yuxi.run_settle(
    p_run yuxi.agent_runs, p_was_interrupted boolean DEFAULT false, p_notify boolean DEFAULT true
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
    v_next uuid;
BEGIN
    IF p_was_interrupted THEN
        UPDATE yuxi.messages SET delivery_status = 'cancelled'
        WHERE id = p_run.input_message_id AND role = 'user';
    ELSE
        INSERT INTO yuxi.run_events (run_id, seq, event, payload)
        VALUES (p_run.run_id, p_run.last_event_seq, 'end',
                jsonb_strip_nulls(jsonb_build_object(
                    'status', p_run.status, 'error_type', p_run.error_type,
                    'error_message', p_run.error_message, 'output_message_id', p_run.output_message_id)));
        IF p_notify THEN
            PERFORM pg_notify('yuxi_run_events', p_run.run_id::text || ' ' || p_run.last_event_seq::text);
        END IF;
        UPDATE yuxi.messages
        SET delivery_status = CASE p_run.status
                WHEN 'failed' THEN 'failed' WHEN 'cancelled' THEN 'cancelled' ELSE 'complete' END
        WHERE id = p_run.input_message_id AND role = 'user';
    END IF;

    -- Children do not outlive a parent that has ended.
    IF p_run.status IN ('completed', 'failed', 'cancelled') THEN
        PERFORM yuxi.run_request_cancel(c.run_id, NULL, p_run.finished_at)
        FROM yuxi.agent_runs c
        WHERE c.created_by_run_id = p_run.run_id AND c.run_type = 'subagent'
          AND c.status IN ('pending', 'running', 'interrupted');
    END IF;

    IF p_run.run_type = 'subagent' THEN
        RETURN;
    END IF;
    SELECT * INTO v_conv FROM yuxi.conversations WHERE thread_id = p_run.thread_id;
    IF p_run.status = 'completed' AND v_conv.paused_by_run_id IS NULL THEN
        v_next := yuxi.thread_dispatch_head(v_conv);  -- also touches updated_at
        IF v_next IS NOT NULL THEN
            RETURN;
        END IF;
    ELSIF p_run.status IN ('failed', 'cancelled')
          AND EXISTS (SELECT 1 FROM yuxi.agent_run_requests
                      WHERE thread_id = p_run.thread_id AND status = 'queued') THEN
        UPDATE yuxi.conversations SET paused_by_run_id = p_run.run_id, updated_at = clock_timestamp()
        WHERE thread_id = p_run.thread_id;
        RETURN;
    END IF;
    UPDATE yuxi.conversations SET updated_at = clock_timestamp() WHERE thread_id = p_run.thread_id;
END;
$$;

-- Locks a run's conversation (top-level runs) and then the run, in the global order.
CREATE FUNCTION yuxi.run_lock(p_run_id uuid, p_uid uuid DEFAULT NULL) RETURNS yuxi.agent_runs
LANGUAGE plpgsql AS $$
DECLARE
    v_run yuxi.agent_runs;
BEGIN
    SELECT * INTO v_run FROM yuxi.agent_runs WHERE run_id = p_run_id AND (p_uid IS NULL OR uid = p_uid);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % not found', p_run_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    PERFORM 1 FROM yuxi.conversations WHERE thread_id = v_run.thread_id FOR UPDATE;
    SELECT * INTO v_run FROM yuxi.agent_runs WHERE run_id = p_run_id FOR UPDATE;
    RETURN v_run;
END;
$$;

-- Ends a run as its lease holder. p_messages ([{role, content, metadata?}, ...]) are
-- stored as the run's output; `completed` needs at least one assistant message.
-- p_notify: as for run_append_events. p_events ([{event, payload}, ...]): the run's last
-- events, appended before its `end` in the same transaction (one round trip fewer).
CREATE FUNCTION yuxi.run_finish(
    p_run_id uuid, p_token uuid, p_status text, p_messages jsonb DEFAULT '[]',
    p_error_type text DEFAULT NULL, p_error_message text DEFAULT NULL, p_now timestamptz DEFAULT NULL,
    p_notify boolean DEFAULT true, p_events jsonb DEFAULT '[]'
) RETURNS yuxi.agent_runs
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_run yuxi.agent_runs;
    v_output bigint;
    v_events integer;
BEGIN
    IF jsonb_typeof(coalesce(p_events, '[]')) <> 'array'
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(p_events, '[]')) e
                  WHERE e ->> 'event' = 'end') THEN
        RAISE EXCEPTION 'events must be a JSON array without an end event'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_events := jsonb_array_length(coalesce(p_events, '[]'));
    IF p_status IS NULL OR p_status NOT IN ('completed', 'failed', 'cancelled', 'interrupted') THEN
        RAISE EXCEPTION 'a run finishes completed, failed, cancelled or interrupted, not %', coalesce(p_status, 'null')
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF jsonb_typeof(coalesce(p_messages, '[]')) <> 'array' THEN
        RAISE EXCEPTION 'messages must be a JSON array' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_run := yuxi.run_lock(p_run_id);
    PERFORM yuxi.lease_check(v_run, p_token, v_now);

    INSERT INTO yuxi.run_events (run_id, seq, event, payload, created_at)
    SELECT p_run_id, v_run.last_event_seq + e.ord, e.value ->> 'event', coalesce(e.value -> 'payload', '{}'), v_now
    FROM jsonb_array_elements(coalesce(p_events, '[]')) WITH ORDINALITY AS e(value, ord);

    WITH stored AS (
        INSERT INTO yuxi.messages (thread_id, role, content, run_id, request_id, metadata)
        SELECT v_run.thread_id, m.value ->> 'role', m.value ->> 'content', p_run_id, v_run.request_id,
               coalesce(m.value -> 'metadata', '{}')
        FROM jsonb_array_elements(coalesce(p_messages, '[]')) WITH ORDINALITY AS m(value, ord)
        ORDER BY m.ord
        RETURNING id, role
    )
    SELECT max(id) FILTER (WHERE role = 'assistant') INTO v_output FROM stored;

    UPDATE yuxi.agent_runs
    SET status = p_status, output_message_id = v_output,
        error_type = p_error_type, error_message = left(p_error_message, 4000),
        lease_token = NULL, lease_expires_at = NULL, finished_at = v_now, updated_at = v_now,
        last_event_seq = last_event_seq + v_events + 1
    WHERE run_id = p_run_id
    RETURNING * INTO v_run;
    UPDATE yuxi.agent_run_attempts SET ended_at = v_now, outcome = p_status
    WHERE run_id = p_run_id AND lease_token = p_token;
    PERFORM yuxi.run_settle(v_run, false, p_notify);
    RETURN v_run;
END;
$$;

-- Gives a run back for another attempt (e.g. a worker shutting down). A run whose
-- cancellation was requested is cancelled instead: there is nothing left to retry.
CREATE FUNCTION yuxi.run_release(
    p_run_id uuid, p_token uuid, p_reason text DEFAULT NULL, p_now timestamptz DEFAULT NULL
) RETURNS yuxi.agent_runs
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_run yuxi.agent_runs;
BEGIN
    v_run := yuxi.run_lock(p_run_id);
    PERFORM yuxi.lease_check(v_run, p_token, v_now);
    IF v_run.status = 'cancel_requested' THEN
        RETURN yuxi.run_finish(p_run_id, p_token, 'cancelled', '[]', NULL, NULL, v_now, true, '[]');
    END IF;
    UPDATE yuxi.agent_runs
    SET status = 'pending', lease_token = NULL, lease_expires_at = NULL, updated_at = v_now,
        delivery_job_id = yuxi.run_delivery_job(p_run_id)
    WHERE run_id = p_run_id
    RETURNING * INTO v_run;
    UPDATE yuxi.agent_run_attempts SET ended_at = v_now, outcome = 'released', detail = p_reason
    WHERE run_id = p_run_id AND lease_token = p_token;
    RETURN v_run;
END;
$$;

-- Asks a run to stop, and its child runs with it. A pending run (no worker holds it)
-- or an interrupted one is cancelled at once; a running one becomes
-- cancel_requested and its worker is woken; it ends `cancelled` only from there.
-- Already ending or ended runs are left as they are. Returns the run's status.
CREATE FUNCTION yuxi.run_request_cancel(
    p_run_id uuid, p_uid uuid DEFAULT NULL, p_now timestamptz DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_run yuxi.agent_runs;
    v_after yuxi.agent_runs;
    v_child uuid;
BEGIN
    v_run := yuxi.run_lock(p_run_id, p_uid);
    -- An interrupted run that was already resumed no longer holds the thread: its
    -- resume run carries on and is what a caller wants to cancel.
    IF v_run.status = 'pending'
       OR (v_run.status = 'interrupted' AND NOT EXISTS (
               SELECT 1 FROM yuxi.agent_runs WHERE created_by_run_id = p_run_id AND run_type = 'resume'))
    THEN
        UPDATE yuxi.agent_runs
        SET status = 'cancelled', cancel_requested_at = v_now, finished_at = v_now, updated_at = v_now,
            last_event_seq = last_event_seq + CASE WHEN status = 'interrupted' THEN 0 ELSE 1 END
        WHERE run_id = p_run_id
        RETURNING * INTO v_after;
        -- the waiting delivery has nothing left to deliver
        UPDATE public.procrastinate_jobs SET status = 'cancelled'
        WHERE id = v_run.delivery_job_id AND status = 'todo';
        PERFORM yuxi.run_settle(v_after, v_run.status = 'interrupted');
    ELSIF v_run.status = 'running' THEN
        UPDATE yuxi.agent_runs
        SET status = 'cancel_requested', cancel_requested_at = v_now, updated_at = v_now
        WHERE run_id = p_run_id;
        PERFORM pg_notify('yuxi_run_cancel', p_run_id::text);
    END IF;
    FOR v_child IN
        SELECT run_id FROM yuxi.agent_runs
        WHERE created_by_run_id = p_run_id AND run_type = 'subagent'
          AND status IN ('pending', 'running', 'interrupted')
    LOOP
        PERFORM yuxi.run_request_cancel(v_child, NULL, v_now);
    END LOOP;
    RETURN (SELECT status FROM yuxi.agent_runs WHERE run_id = p_run_id);
END;
$$;

-- Resumes the latest top-level run of a thread, which must be interrupted, as a new
-- `resume` run inheriting its model and approval mode. Idempotent: resuming the same
-- run again returns the resume run already created.
CREATE FUNCTION yuxi.run_resume(
    p_run_id uuid, p_resume jsonb, p_uid uuid DEFAULT NULL, p_request_id text DEFAULT NULL
) RETURNS yuxi.request_info
LANGUAGE plpgsql AS $$
DECLARE
    v_run yuxi.agent_runs;
    v_conv yuxi.conversations;
    v_existing yuxi.agent_runs;
    v_new_run uuid := gen_random_uuid();
BEGIN
    IF p_request_id IS NOT NULL AND p_request_id !~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$' THEN
        RAISE EXCEPTION 'request_id must be 1-128 characters of letters, digits and . _ : - (starting with a letter or digit)'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    SELECT * INTO v_run FROM yuxi.agent_runs WHERE run_id = p_run_id AND (p_uid IS NULL OR uid = p_uid);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % not found', p_run_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    v_conv := yuxi.thread_lock(p_uid, v_run.thread_id);
    SELECT * INTO v_run FROM yuxi.agent_runs WHERE run_id = p_run_id FOR UPDATE;

    SELECT * INTO v_existing FROM yuxi.agent_runs WHERE created_by_run_id = p_run_id AND run_type = 'resume';
    IF FOUND THEN
        IF p_request_id IS NULL OR p_request_id = v_existing.request_id THEN
            RETURN yuxi.request_view(v_existing.request_id);
        END IF;
        RAISE EXCEPTION 'run % was already resumed by request %', p_run_id, v_existing.request_id
            USING ERRCODE = 'YQ004', HINT = 'resume_superseded';
    END IF;
    IF p_request_id IS NOT NULL
       AND EXISTS (SELECT 1 FROM yuxi.agent_run_requests WHERE request_id = p_request_id) THEN
        RAISE EXCEPTION 'request_id % is already used for another request', p_request_id
            USING ERRCODE = 'YQ001', HINT = 'request_id_conflict';
    END IF;
    IF v_run.run_type = 'subagent' OR v_conv.last_run_id IS DISTINCT FROM p_run_id THEN
        RAISE EXCEPTION 'run % is not the latest run of thread %', p_run_id, v_run.thread_id
            USING ERRCODE = 'YQ004', HINT = 'resume_superseded';
    END IF;
    IF v_run.status <> 'interrupted' THEN
        RAISE EXCEPTION 'run % is %, not interrupted', p_run_id, v_run.status
            USING ERRCODE = 'YQ005', HINT = 'run_not_interrupted';
    END IF;

    p_request_id := coalesce(p_request_id, gen_random_uuid()::text);
    INSERT INTO yuxi.agent_run_requests (request_id, uid, thread_id, source, queue_policy, status,
                                         dispatched_run_id, input_payload)
    VALUES (p_request_id, v_run.uid, v_run.thread_id, 'resume', 'enqueue', 'dispatched', v_new_run,
            (v_run.input_payload - 'resume') || jsonb_build_object('resume', coalesce(p_resume, 'null')));
    INSERT INTO yuxi.agent_runs (run_id, thread_id, uid, agent_slug, request_id, run_type,
                                 created_by_run_id, input_payload, delivery_job_id)
    VALUES (v_new_run, v_run.thread_id, v_run.uid, v_run.agent_slug, p_request_id, 'resume', p_run_id,
            (v_run.input_payload - 'resume') || jsonb_build_object('resume', coalesce(p_resume, 'null')),
            yuxi.run_delivery_job(v_new_run, true));
    UPDATE yuxi.conversations SET last_run_id = v_new_run, updated_at = clock_timestamp()
    WHERE thread_id = v_run.thread_id;
    RETURN yuxi.request_view(p_request_id);
END;
$$;

-- Creates a child run executed on behalf of a running parent (the task tool). The
-- child's model: the child agent's config, then the parent run's model, then default.
CREATE FUNCTION yuxi.run_create_subagent(
    p_parent_run_id uuid, p_token uuid, p_agent_slug text, p_input jsonb DEFAULT '{}',
    p_now timestamptz DEFAULT NULL
) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_parent yuxi.agent_runs;
    v_agent yuxi.agents;
    v_run_id uuid := gen_random_uuid();
BEGIN
    v_parent := yuxi.run_lock_leased(p_parent_run_id, p_token, coalesce(p_now, clock_timestamp()));
    IF v_parent.status <> 'running' THEN
        RAISE EXCEPTION 'run % is %; it cannot start subagents', p_parent_run_id, v_parent.status
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    SELECT * INTO v_agent FROM yuxi.agents WHERE slug = p_agent_slug AND is_subagent;
    IF NOT FOUND OR NOT yuxi.agent_visible_to(p_agent_slug, v_parent.uid) THEN
        RAISE EXCEPTION 'subagent % not found', p_agent_slug USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    INSERT INTO yuxi.agent_runs (run_id, thread_id, uid, agent_slug, request_id, run_type,
                                 created_by_run_id, delivery_job_id, input_payload)
    VALUES (v_run_id, v_parent.thread_id, v_parent.uid, p_agent_slug, v_parent.request_id, 'subagent',
            p_parent_run_id, yuxi.run_delivery_job(v_run_id, true),
            coalesce(p_input, '{}') || jsonb_build_object(
                'model_spec', coalesce(nullif(v_agent.config_json #>> '{context,model}', ''),
                                       v_parent.input_payload ->> 'model_spec',
                                       (SELECT value FROM yuxi.system_settings WHERE key = 'default_model')),
                'tool_approval_mode', coalesce(v_parent.input_payload ->> 'tool_approval_mode', 'auto')));
    RETURN v_run_id;
END;
$$;

-- ---------------------------------------------------------------------------------
-- Maintenance

CREATE VIEW yuxi.expired_run_leases AS
SELECT r.run_id, r.thread_id, r.status, r.lease_owner, r.lease_expires_at, r.attempt_count
FROM yuxi.agent_runs r
WHERE r.status IN ('running', 'cancel_requested') AND r.lease_expires_at <= clock_timestamp();

-- Pending runs whose delivery is gone: no job, a finished job, or a job whose worker
-- is gone. The recovery scan re-delivers these.
CREATE VIEW yuxi.undelivered_runs AS
SELECT r.run_id, r.thread_id, r.created_at, r.delivery_job_id, j.status::text AS job_status
FROM yuxi.agent_runs r
LEFT JOIN public.procrastinate_jobs j ON j.id = r.delivery_job_id
WHERE r.status = 'pending'
  AND (j.id IS NULL
       OR j.status NOT IN ('todo', 'doing')
       OR (j.status = 'doing' AND j.worker_id IS NULL));

-- Ends runs whose worker stopped renewing. Safe to run from many processes at once:
-- each run is taken under SKIP LOCKED and re-checked, so it is handled exactly once.
-- A run with attempts left (agents.max_run_attempts) is released to continue from its
-- checkpoint; a cancel_requested run ends cancelled; the rest fail with
-- worker_lease_expired and pause their thread's backlog.
CREATE FUNCTION yuxi.run_reconcile_expired(p_now timestamptz DEFAULT NULL, p_limit integer DEFAULT 100)
RETURNS TABLE (run_id uuid, status text)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_candidate record;
    v_run yuxi.agent_runs;
    v_max integer;
BEGIN
    FOR v_candidate IN
        SELECT r.run_id, r.thread_id FROM yuxi.agent_runs r
        WHERE r.status IN ('running', 'cancel_requested') AND r.lease_expires_at <= v_now
        ORDER BY r.lease_expires_at
        LIMIT p_limit
    LOOP
        PERFORM 1 FROM yuxi.conversations c WHERE c.thread_id = v_candidate.thread_id
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        SELECT * INTO v_run FROM yuxi.agent_runs r
        WHERE r.run_id = v_candidate.run_id AND r.status IN ('running', 'cancel_requested')
          AND r.lease_expires_at <= v_now
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;

        UPDATE yuxi.agent_run_attempts a
        SET ended_at = v_now, outcome = 'lease_expired',
            detail = format('the worker %s stopped renewing its lease (expired %s)',
                            v_run.lease_owner, v_run.lease_expires_at)
        WHERE a.run_id = v_run.run_id AND a.lease_token = v_run.lease_token;
        SELECT a.max_run_attempts INTO v_max FROM yuxi.agents a WHERE a.slug = v_run.agent_slug;
        IF v_run.status = 'cancel_requested' THEN
            UPDATE yuxi.agent_runs r
            SET status = 'cancelled', lease_token = NULL, lease_expires_at = NULL,
                error_type = 'worker_lease_expired',
                error_message = format('cancelled: the worker %s stopped renewing its lease',
                                       v_run.lease_owner),
                finished_at = v_now, updated_at = v_now, last_event_seq = r.last_event_seq + 1
            WHERE r.run_id = v_run.run_id
            RETURNING * INTO v_run;
            PERFORM yuxi.run_settle(v_run);
        ELSIF v_run.attempt_count < coalesce(v_max, 1) THEN
            UPDATE yuxi.agent_runs r
            SET status = 'pending', lease_token = NULL, lease_expires_at = NULL, updated_at = v_now,
                delivery_job_id = yuxi.run_delivery_job(v_run.run_id)
            WHERE r.run_id = v_run.run_id
            RETURNING * INTO v_run;
        ELSE
            UPDATE yuxi.agent_runs r
            SET status = 'failed', lease_token = NULL, lease_expires_at = NULL,
                error_type = 'worker_lease_expired',
                error_message = format('the worker %s stopped renewing its lease (expired %s)',
                                       v_run.lease_owner, v_run.lease_expires_at),
                finished_at = v_now, updated_at = v_now, last_event_seq = r.last_event_seq + 1
            WHERE r.run_id = v_run.run_id
            RETURNING * INTO v_run;
            PERFORM yuxi.run_settle(v_run);
        END IF;
        run_id := v_run.run_id;
        status := v_run.status;
        RETURN NEXT;
    END LOOP;
END;
$$;

-- Re-delivers pending runs whose delivery job is gone. Never duplicates a delivery:
-- the run row is locked and the queueing lock admits one waiting job per run.
CREATE FUNCTION yuxi.run_redeliver_orphans(p_limit integer DEFAULT 100)
RETURNS TABLE (run_id uuid, job_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_candidate uuid;
BEGIN
    FOR v_candidate IN
        SELECT u.run_id FROM yuxi.undelivered_runs u ORDER BY u.created_at LIMIT p_limit
    LOOP
        PERFORM 1 FROM yuxi.agent_runs r
        WHERE r.run_id = v_candidate AND r.status = 'pending'
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        -- re-checked under the lock: another scan may have just re-delivered it
        CONTINUE WHEN NOT EXISTS (SELECT 1 FROM yuxi.undelivered_runs u WHERE u.run_id = v_candidate);
        CONTINUE WHEN EXISTS (SELECT 1 FROM public.procrastinate_jobs j
                              WHERE j.queueing_lock = 'run:' || v_candidate::text AND j.status = 'todo');
        run_id := v_candidate;
        UPDATE yuxi.agent_runs r SET delivery_job_id = yuxi.run_delivery_job(v_candidate)
        WHERE r.run_id = v_candidate
        RETURNING r.delivery_job_id INTO job_id;
        RETURN NEXT;
    END LOOP;
END;
$$;

-- ---------------------------------------------------------------------------------
-- Threads

-- Creates a conversation bound to an agent the user can see, in a project the user
-- owns (or none).
CREATE FUNCTION yuxi.thread_create(
    p_uid uuid, p_agent_slug text, p_project_id uuid DEFAULT NULL, p_title text DEFAULT ''
) RETURNS yuxi.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
BEGIN
    IF NOT yuxi.agent_visible_to(p_agent_slug, p_uid) THEN
        RAISE EXCEPTION 'agent % not found', p_agent_slug USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    IF p_project_id IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM yuxi.projects WHERE id = p_project_id AND uid = p_uid AND deleted_at IS NULL) THEN
        RAISE EXCEPTION 'project % not found', p_project_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    INSERT INTO yuxi.conversations (uid, agent_slug, project_id, title)
    VALUES (p_uid, p_agent_slug, p_project_id, coalesce(p_title, ''))
    RETURNING * INTO v_conv;
    RETURN v_conv;
END;
$$;
