-- Durable attempts: an attempt cut by something outside the agent (a lost lease, a lost
-- database connection, a worker shutting down) is an infrastructure retry, counted in
-- agent_runs.infra_retries and limited by the workers' YUXI_INFRA_RETRIES (p_infra_limit),
-- not by agents.max_run_attempts, which becomes the budget of the agent's own failures
-- (yuxi.run_retry with p_cause 'agent'). A run given back waits a back-off before its next
-- attempt (yuxi.run_retry_delay). Tool calls with effects are recorded by tool call id
-- (yuxi.run_tool_calls), so a later attempt that makes the same call again does not
-- apply it twice.

ALTER TABLE yuxi.agent_runs
    ADD COLUMN infra_retries integer NOT NULL DEFAULT 0 CHECK (infra_retries >= 0);
COMMENT ON COLUMN yuxi.agent_runs.infra_retries IS
    'Attempts given back for a cause outside the agent (lost lease, lost database connection, worker shutdown), limited by the workers'' YUXI_INFRA_RETRIES, not by agents.max_run_attempts';

-- The tool calls of a run whose effect was applied, by the model's tool call id: a later
-- attempt of the run that makes the same call again (it resumed before the call's result
-- reached the checkpoint) gets the recorded result instead of applying it twice. Written
-- in the transaction of the effect itself where the effect is in the database (memory).
CREATE TABLE yuxi.run_tool_calls (
    run_id      uuid NOT NULL REFERENCES yuxi.agent_runs (run_id) ON DELETE CASCADE,
    call_id     text NOT NULL CHECK (length(call_id) BETWEEN 1 AND 200),
    tool        text NOT NULL CHECK (length(tool) BETWEEN 1 AND 200),
    attempt_no  integer NOT NULL CHECK (attempt_no >= 1),
    result      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (run_id, call_id)
);
COMMENT ON TABLE yuxi.run_tool_calls IS
    'Side-effecting tool calls a run applied, by tool call id, with their result: applied at most once across attempts (yuxi.run_tool_call_record)';

INSERT INTO yuxi.maintenance_counters (name, value) VALUES ('released_after_agent_error', 0)
ON CONFLICT (name) DO NOTHING;
COMMENT ON TABLE yuxi.maintenance_counters IS
    'Counts of maintenance work since the database was created: lease_expired (leases the reconciler ended), lease_released (of those, runs put back to pending for another attempt), redelivered_missing (pending runs re-delivered because their job was missing or finished), redelivered_stalled (pending runs re-delivered because their job''s worker stopped), released_after_error (runs a worker gave back for another attempt after losing its database connection, yuxi.run_retry), delivery_pruned (finished or abandoned procrastinate jobs deleted, yuxi.delivery_prune), released_after_agent_error (runs a worker gave back for another attempt within their agent''s max_run_attempts after the agent, its model or a tool failed, yuxi.run_retry)';

DROP FUNCTION yuxi.run_delivery_job(uuid, boolean);
DROP FUNCTION yuxi.run_release(uuid, uuid, text, timestamptz);
DROP FUNCTION yuxi.run_retry(uuid, uuid, text, text, timestamptz, boolean);
DROP FUNCTION yuxi.run_reconcile_expired(timestamptz, integer);
DROP FUNCTION yuxi.run_redelivery_job(yuxi.agent_runs);

-- Inserts the procrastinate job that delivers a run, in the caller's transaction, so a
-- pending run always has exactly one waiting delivery and a rolled-back one has none;
-- returns the job id for the caller to store in agent_runs.delivery_job_id in the same
-- write that makes the run pending (a second write of a fresh row would re-run its
-- foreign-key checks). The queueing lock makes a second waiting delivery of the same
-- run impossible; a delivery still waiting is reused. Callers hold the run row, or are
-- creating it. p_after: the job waits that long before a worker may take it (the
-- back-off of a retried run).
CREATE FUNCTION yuxi.run_delivery_job(
    p_run_id uuid, p_new_run boolean DEFAULT false, p_after interval DEFAULT NULL
) RETURNS bigint
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
            jsonb_build_object('run_id', p_run_id::text),
            CASE WHEN p_after > interval '0' THEN clock_timestamp() + p_after END
        )::public.procrastinate_job_to_defer_v1
    ]))[1];
END;
$$;
COMMENT ON FUNCTION yuxi.run_delivery_job(uuid, boolean, interval) IS
    'Internal: the procrastinate job that delivers a run, inserted in the caller''s transaction (a waiting one is reused); p_after delays it';

-- How long a run given back after p_attempts attempts waits before its next one: none
-- after the first (a crashed worker's run goes on at once elsewhere), then 1 s, 2 s,
-- 4 s, … up to 30 s.
CREATE FUNCTION yuxi.run_retry_delay(p_attempts integer) RETURNS interval
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_attempts <= 1 THEN interval '0'
                ELSE make_interval(secs => least(30, power(2, least(p_attempts, 10) - 2)))
           END
$$;
COMMENT ON FUNCTION yuxi.run_retry_delay(integer) IS
    'The back-off before the next attempt of a run given back after p_attempts attempts: 0, 1 s, 2 s, 4 s, … up to 30 s';

-- The delivery of a run given back for another attempt: a new procrastinate job after
-- the run's back-off, or none for a child run (its parent's worker takes it again).
CREATE FUNCTION yuxi.run_redelivery_job(p_run yuxi.agent_runs) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    IF p_run.run_type = 'subagent' THEN
        RETURN NULL;
    END IF;
    RETURN yuxi.run_delivery_job(p_run.run_id, false, yuxi.run_retry_delay(p_run.attempt_count));
END;
$$;
COMMENT ON FUNCTION yuxi.run_redelivery_job(yuxi.agent_runs) IS
    'Internal: the delivery job of a run given back for another attempt, after its back-off (none for a child run, which its parent executes)';

-- Gives a leased run (locked by the caller) back as pending for another attempt, its
-- delivery after the back-off; p_infra counts the attempt as an infrastructure retry.
-- The caller ends the attempt's row.
CREATE FUNCTION yuxi.run_give_back(p_run yuxi.agent_runs, p_infra boolean, p_now timestamptz)
RETURNS yuxi.agent_runs
LANGUAGE plpgsql AS $$
DECLARE
    v_run yuxi.agent_runs;
BEGIN
    UPDATE yuxi.agent_runs r
    SET status = 'pending', lease_token = NULL, lease_expires_at = NULL, updated_at = p_now,
        infra_retries = r.infra_retries + CASE WHEN p_infra THEN 1 ELSE 0 END,
        delivery_job_id = yuxi.run_redelivery_job(p_run)
    WHERE r.run_id = p_run.run_id
    RETURNING * INTO v_run;
    PERFORM yuxi.run_cancel_children(p_run.run_id, p_now);
    RETURN v_run;
END;
$$;
COMMENT ON FUNCTION yuxi.run_give_back(yuxi.agent_runs, boolean, timestamptz) IS
    'Internal: a leased, locked run goes back to pending for another attempt (delivered after its back-off; p_infra: counted in infra_retries)';

-- The message of a run failed because its infrastructure retries are spent.
CREATE FUNCTION yuxi.run_infra_spent(p_message text, p_run yuxi.agent_runs) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT left(format('%s; no infrastructure retry left (%s used)', p_message, p_run.infra_retries), 4000)
$$;
COMMENT ON FUNCTION yuxi.run_infra_spent(text, yuxi.agent_runs) IS
    'Internal: the error message of a run failed with its infrastructure retries spent';

-- Gives a run back for another attempt (a worker shutting down), as an infrastructure
-- retry: with p_infra_limit retries spent, the run fails with `worker_shutdown` instead.
-- A run whose cancellation was requested is cancelled: there is nothing left to retry.
CREATE FUNCTION yuxi.run_release(
    p_run_id uuid, p_token uuid, p_reason text DEFAULT NULL, p_now timestamptz DEFAULT NULL,
    p_infra_limit integer DEFAULT 3
) RETURNS yuxi.agent_runs
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_run yuxi.agent_runs;
    v_message text;
BEGIN
    v_run := yuxi.run_lock(p_run_id);
    PERFORM yuxi.lease_check(v_run, p_token, v_now);
    IF v_run.status = 'cancel_requested' THEN
        RETURN yuxi.run_finish(p_run_id, p_token, 'cancelled', '[]', NULL, NULL, v_now, true, '[]');
    END IF;
    IF v_run.infra_retries >= p_infra_limit THEN
        v_message := yuxi.run_infra_spent(coalesce(p_reason, 'the worker stopped'), v_run);
        RETURN yuxi.run_finish(
            p_run_id, p_token, 'failed', '[]', 'worker_shutdown', v_message, v_now, true,
            jsonb_build_array(jsonb_build_object('event', 'error', 'payload', jsonb_build_object(
                'error_type', 'worker_shutdown', 'message', v_message))));
    END IF;
    v_run := yuxi.run_give_back(v_run, true, v_now);
    UPDATE yuxi.agent_run_attempts SET ended_at = v_now, outcome = 'released', detail = p_reason
    WHERE run_id = p_run_id AND lease_token = p_token;
    RETURN v_run;
END;
$$;
COMMENT ON FUNCTION yuxi.run_release(uuid, uuid, text, timestamptz, integer) IS
    'Worker: gives a run back as pending for another attempt, an infrastructure retry (failed with worker_shutdown once p_infra_limit are spent; a cancel_requested one is cancelled). Raises lease_lost (YL001)';

-- Gives a run back after its attempt was cut by an error: p_cause 'infrastructure' (the
-- worker lost its database connection mid-run: not the agent's fault) retries within
-- p_infra_limit infrastructure retries, without spending the agent's budget; p_cause
-- 'agent' (the agent, its model or a tool failed) retries within the agent's budget,
-- agents.max_run_attempts attempts of its own. Otherwise the run fails with
-- p_error_type after an `error` event, like any failure the worker writes. A run whose
-- cancellation was requested is cancelled instead. p_notify: as for run_finish.
CREATE FUNCTION yuxi.run_retry(
    p_run_id uuid, p_token uuid, p_error_type text, p_error_message text,
    p_now timestamptz DEFAULT NULL, p_notify boolean DEFAULT true,
    p_cause text DEFAULT 'infrastructure', p_infra_limit integer DEFAULT 3
) RETURNS yuxi.agent_runs
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_run yuxi.agent_runs;
    v_max integer;
    v_infra boolean := p_cause = 'infrastructure';
    v_message text := left(p_error_message, 4000);
BEGIN
    IF p_error_type IS NULL OR p_error_type !~ '^[A-Za-z][A-Za-z0-9_]{0,62}$' THEN
        RAISE EXCEPTION 'error type must be a name' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_cause IS NULL OR p_cause NOT IN ('infrastructure', 'agent') THEN
        RAISE EXCEPTION 'cause must be infrastructure or agent' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_run := yuxi.run_lock(p_run_id);
    PERFORM yuxi.lease_check(v_run, p_token, v_now);
    IF v_run.status = 'cancel_requested' THEN
        RETURN yuxi.run_finish(p_run_id, p_token, 'cancelled', '[]', NULL, NULL, v_now, p_notify, '[]');
    END IF;
    SELECT a.max_run_attempts INTO v_max FROM yuxi.agents a WHERE a.slug = v_run.agent_slug;
    IF v_infra AND v_run.infra_retries >= p_infra_limit THEN
        v_message := yuxi.run_infra_spent(v_message, v_run);
    END IF;
    IF (v_infra AND v_run.infra_retries >= p_infra_limit)
       OR (NOT v_infra AND v_run.attempt_count - v_run.infra_retries >= coalesce(v_max, 1)) THEN
        RETURN yuxi.run_finish(
            p_run_id, p_token, 'failed', '[]', p_error_type, v_message, v_now, p_notify,
            jsonb_build_array(jsonb_build_object('event', 'error', 'payload', jsonb_build_object(
                'error_type', p_error_type, 'message', v_message))));
    END IF;
    v_run := yuxi.run_give_back(v_run, v_infra, v_now);
    UPDATE yuxi.agent_run_attempts
    SET ended_at = v_now, outcome = 'released',
        detail = left(format('%s: %s', p_error_type, p_error_message), 4000)
    WHERE run_id = p_run_id AND lease_token = p_token;
    PERFORM yuxi.maintenance_count(CASE WHEN v_infra THEN 'released_after_error'
                                        ELSE 'released_after_agent_error' END);
    RETURN v_run;
END;
$$;
COMMENT ON FUNCTION yuxi.run_retry(uuid, uuid, text, text, timestamptz, boolean, text, integer) IS
    'Worker: after an error cuts an attempt, gives the run back for another attempt (p_cause infrastructure: within p_infra_limit infrastructure retries; agent: within agents.max_run_attempts), else fails it with p_error_type (a cancel_requested run is cancelled). Raises invalid_input (YV001), lease_lost (YL001)';

-- Ends runs whose worker stopped renewing. Safe to run from many processes at once:
-- each run is taken under SKIP LOCKED and re-checked, so it is handled exactly once.
-- A lost lease is not the agent's fault: a run with infrastructure retries left
-- (p_infra_limit) is given back to continue from its checkpoint, without spending
-- agents.max_run_attempts; a cancel_requested run ends cancelled; the rest fail with
-- worker_lease_expired and pause their thread's backlog.
CREATE FUNCTION yuxi.run_reconcile_expired(
    p_now timestamptz DEFAULT NULL, p_limit integer DEFAULT 100, p_infra_limit integer DEFAULT 3
)
RETURNS TABLE (run_id uuid, status text)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_candidate record;
    v_run yuxi.agent_runs;
    v_expired bigint := 0;
    v_released bigint := 0;
BEGIN
    FOR v_candidate IN
        SELECT r.run_id, r.thread_id FROM yuxi.agent_runs r
        WHERE yuxi.run_is_leased(r.status) AND r.lease_expires_at <= v_now
        ORDER BY r.lease_expires_at
        LIMIT p_limit
    LOOP
        PERFORM 1 FROM yuxi.conversations c WHERE c.thread_id = v_candidate.thread_id
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        SELECT * INTO v_run FROM yuxi.agent_runs r
        WHERE r.run_id = v_candidate.run_id AND yuxi.run_is_leased(r.status)
          AND r.lease_expires_at <= v_now
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;

        UPDATE yuxi.agent_run_attempts a
        SET ended_at = v_now, outcome = 'lease_expired',
            detail = format('the worker %s stopped renewing its lease (expired %s)',
                            v_run.lease_owner, v_run.lease_expires_at)
        WHERE a.run_id = v_run.run_id AND a.lease_token = v_run.lease_token;
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
        ELSIF v_run.infra_retries < p_infra_limit THEN
            v_run := yuxi.run_give_back(v_run, true, v_now);
            v_released := v_released + 1;
        ELSE
            UPDATE yuxi.agent_runs r
            SET status = 'failed', lease_token = NULL, lease_expires_at = NULL,
                error_type = 'worker_lease_expired',
                error_message = yuxi.run_infra_spent(
                    format('the worker %s stopped renewing its lease (expired %s)',
                           v_run.lease_owner, v_run.lease_expires_at), v_run),
                finished_at = v_now, updated_at = v_now, last_event_seq = r.last_event_seq + 1
            WHERE r.run_id = v_run.run_id
            RETURNING * INTO v_run;
            PERFORM yuxi.run_settle(v_run);
        END IF;
        v_expired := v_expired + 1;
        run_id := v_run.run_id;
        status := v_run.status;
        RETURN NEXT;
    END LOOP;
    -- one write per counter and pass: concurrent reconcilers wait on it only briefly
    IF v_expired > 0 THEN
        PERFORM yuxi.maintenance_count('lease_expired', v_expired);
    END IF;
    IF v_released > 0 THEN
        PERFORM yuxi.maintenance_count('lease_released', v_released);
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.run_reconcile_expired(timestamptz, integer, integer) IS
    'Maintenance: ends runs whose lease expired (given back for another attempt within p_infra_limit infrastructure retries, cancelled, or failed with worker_lease_expired), counted in yuxi.maintenance_counters (lease_expired, lease_released); safe from many processes at once';

-- The result recorded for a tool call of the run (NULL: not applied yet).
CREATE FUNCTION yuxi.run_tool_call_result(p_run_id uuid, p_call_id text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT t.result FROM yuxi.run_tool_calls t WHERE t.run_id = p_run_id AND t.call_id = p_call_id
$$;
COMMENT ON FUNCTION yuxi.run_tool_call_result(uuid, text) IS
    'Worker: the result recorded for a run''s tool call, NULL when it was not applied';

-- Records that the run's current attempt applied a tool call, with its result; in the
-- effect's own transaction where the effect is in the database, so both commit or
-- neither. Returns false (and records nothing) when the call was recorded already: the
-- caller must then not apply it (its transaction rolls back). Raises lease_lost (YL001).
CREATE FUNCTION yuxi.run_tool_call_record(
    p_run_id uuid, p_token uuid, p_call_id text, p_tool text, p_result text,
    p_now timestamptz DEFAULT NULL
) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_run yuxi.agent_runs;
BEGIN
    SELECT * INTO v_run FROM yuxi.agent_runs r WHERE r.run_id = p_run_id;
    PERFORM yuxi.lease_check(v_run, p_token, v_now);
    INSERT INTO yuxi.run_tool_calls (run_id, call_id, tool, attempt_no, result, created_at)
    VALUES (p_run_id, p_call_id, p_tool, v_run.attempt_count, p_result, v_now)
    ON CONFLICT ON CONSTRAINT run_tool_calls_pkey DO NOTHING;
    RETURN FOUND;
END;
$$;
COMMENT ON FUNCTION yuxi.run_tool_call_record(uuid, uuid, text, text, text, timestamptz) IS
    'Worker: records that the run applied a tool call (false when it was recorded already: do not apply it). Raises lease_lost (YL001)';

CREATE OR REPLACE FUNCTION yuxi.agent_runs_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.status <> 'pending' THEN
            RAISE EXCEPTION 'a run starts pending, not %', NEW.status
                USING ERRCODE = 'YT001', HINT = 'illegal_transition';
        END IF;
        RETURN NEW;
    END IF;

    IF NEW.run_id <> OLD.run_id OR NEW.thread_id <> OLD.thread_id OR NEW.request_id <> OLD.request_id
       OR NEW.run_type <> OLD.run_type OR NEW.uid <> OLD.uid
       OR NEW.created_by_run_id IS DISTINCT FROM OLD.created_by_run_id
       OR NEW.input_payload <> OLD.input_payload
       OR NEW.attempt_count < OLD.attempt_count OR NEW.last_event_seq < OLD.last_event_seq
       OR NEW.infra_retries < OLD.infra_retries THEN
        RAISE EXCEPTION 'run % identity, input, attempts and event seq cannot be rewritten', OLD.run_id
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    IF OLD.manifest_fingerprint IS NOT NULL
       AND (NEW.manifest_fingerprint IS DISTINCT FROM OLD.manifest_fingerprint
            OR NEW.manifest IS DISTINCT FROM OLD.manifest) THEN
        RAISE EXCEPTION 'run % manifest is write-once (fingerprint %)', OLD.run_id, OLD.manifest_fingerprint
            USING ERRCODE = 'YM001', HINT = 'manifest_conflict';
    END IF;

    IF NEW.status IS DISTINCT FROM OLD.status
       AND NOT yuxi.run_transition_allowed(OLD.status, NEW.status) THEN
        RAISE EXCEPTION 'run % cannot go from % to %', OLD.run_id, OLD.status, NEW.status
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    IF yuxi.run_is_final(OLD.status)
       AND (NEW.output_message_id IS DISTINCT FROM OLD.output_message_id
            OR NEW.error_type IS DISTINCT FROM OLD.error_type
            OR NEW.error_message IS DISTINCT FROM OLD.error_message
            OR NEW.finished_at IS DISTINCT FROM OLD.finished_at) THEN
        RAISE EXCEPTION 'run % is % and its outcome is final', OLD.run_id, OLD.status
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    IF NEW.status = 'completed' AND OLD.status <> 'completed' AND NOT EXISTS (
           SELECT 1 FROM yuxi.messages m
           WHERE m.id = NEW.output_message_id AND m.run_id = NEW.run_id AND m.role = 'assistant') THEN
        RAISE EXCEPTION 'run % cannot complete without an assistant message of its own', OLD.run_id
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    RETURN NEW;
END;
$$;

-- A lookup of an existing tree (two per claim) opens no subtransaction: only the insert
-- of a new one needs the exception block.
-- The tree of the owner's kind and root, created when missing (it holds nothing yet).
CREATE OR REPLACE FUNCTION yuxi.file_tree(p_owner_uid uuid, p_kind text, p_root text DEFAULT '')
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_id uuid;
BEGIN
    SELECT t.id INTO v_id FROM yuxi.file_trees t
    WHERE t.owner_uid = p_owner_uid AND t.kind = p_kind AND t.root = p_root;
    IF FOUND THEN
        RETURN v_id;  -- the common case, without the subtransaction the insert needs
    END IF;
    BEGIN
        INSERT INTO yuxi.file_trees (owner_uid, kind, root) VALUES (p_owner_uid, p_kind, p_root)
        ON CONFLICT (owner_uid, kind, root) DO NOTHING
        RETURNING id INTO v_id;
    EXCEPTION WHEN check_violation THEN
        RAISE EXCEPTION 'no file tree % at %', p_kind, p_root USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END;
    IF v_id IS NULL THEN  -- another transaction made it first
        SELECT t.id INTO v_id FROM yuxi.file_trees t
        WHERE t.owner_uid = p_owner_uid AND t.kind = p_kind AND t.root = p_root;
    END IF;
    RETURN v_id;
END;
$$;
COMMENT ON FUNCTION yuxi.file_tree(uuid, text, text) IS
    'The id of the user''s tree of a kind (workspace, workdir, knowledge_base) at a root, created when missing. Raises invalid_input (YV001)';
