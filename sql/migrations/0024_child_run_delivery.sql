-- A child run has one delivery path: its parent's worker executes it, in the parent's
-- attempt. yuxi.run_create_subagent defers no procrastinate job for it (before, a job
-- raced the parent, which then polled for the end); a child given back for another
-- attempt gets none either (yuxi.run_redelivery_job), and the recovery scan leaves
-- child runs alone. A parent given back for another attempt (released, retried after an
-- outage, or its lease expired) cancels its active children (yuxi.run_cancel_children):
-- nothing else would execute them, and its next attempt starts its own.

-- Child runs waiting for a delivery job made before this: the job is withdrawn (their
-- parent's worker executes them).
UPDATE public.procrastinate_jobs j SET status = 'cancelled'
FROM yuxi.agent_runs r
WHERE r.run_type = 'subagent' AND r.status = 'pending' AND j.id = r.delivery_job_id
  AND j.status = 'todo';
UPDATE yuxi.agent_runs SET delivery_job_id = NULL
WHERE run_type = 'subagent' AND status = 'pending' AND delivery_job_id IS NOT NULL;

-- Gives a run back for another attempt (e.g. a worker shutting down). A run whose
-- cancellation was requested is cancelled instead: there is nothing left to retry.
-- The delivery of a run given back for another attempt: a new procrastinate job, or
-- none for a child run (its parent's worker takes it again).
CREATE FUNCTION yuxi.run_redelivery_job(p_run yuxi.agent_runs) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    IF p_run.run_type = 'subagent' THEN
        RETURN NULL;
    END IF;
    RETURN yuxi.run_delivery_job(p_run.run_id);
END;
$$;
COMMENT ON FUNCTION yuxi.run_redelivery_job(yuxi.agent_runs) IS
    'Internal: the delivery job of a run given back for another attempt (none for a child run, which its parent executes)';

-- A parent whose attempt ended without ending the run (given back for another attempt)
-- takes its children with it: the next attempt starts its own, and nothing else would
-- execute these.
CREATE FUNCTION yuxi.run_cancel_children(p_run_id uuid, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM yuxi.run_request_cancel(c.run_id, NULL, p_now)
    FROM yuxi.agent_runs c
    WHERE c.created_by_run_id = p_run_id AND c.run_type = 'subagent'
      AND yuxi.run_is_cancellable(c.status);
END;
$$;
COMMENT ON FUNCTION yuxi.run_cancel_children(uuid, timestamptz) IS
    'Internal: asks the active child runs of a run to stop (its attempt ended)';

CREATE OR REPLACE FUNCTION yuxi.run_release(
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
        delivery_job_id = yuxi.run_redelivery_job(v_run)
    WHERE run_id = p_run_id
    RETURNING * INTO v_run;
    UPDATE yuxi.agent_run_attempts SET ended_at = v_now, outcome = 'released', detail = p_reason
    WHERE run_id = p_run_id AND lease_token = p_token;
    PERFORM yuxi.run_cancel_children(p_run_id, v_now);
    RETURN v_run;
END;
$$;
COMMENT ON FUNCTION yuxi.run_release(uuid, uuid, text, timestamptz) IS
    'Worker: gives a run back as pending for another attempt (a cancel_requested one is cancelled instead). Raises lease_lost (YL001)';

-- Gives a run back after its attempt was cut by an error that is not the run's own (the
-- worker lost its database connection mid-run): another attempt when the agent's retry
-- budget (agents.max_run_attempts) has one left, as yuxi.run_reconcile_expired would
-- after a lost lease; otherwise the run fails with p_error_type after an `error` event,
-- like any failure the worker writes. A run whose cancellation was requested is
-- cancelled instead. p_notify: as for run_finish.
CREATE OR REPLACE FUNCTION yuxi.run_retry(
    p_run_id uuid, p_token uuid, p_error_type text, p_error_message text,
    p_now timestamptz DEFAULT NULL, p_notify boolean DEFAULT true
) RETURNS yuxi.agent_runs
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_run yuxi.agent_runs;
    v_max integer;
BEGIN
    IF p_error_type IS NULL OR p_error_type !~ '^[a-z][a-z_]{0,62}$' THEN
        RAISE EXCEPTION 'error type must be a lowercase name' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_run := yuxi.run_lock(p_run_id);
    PERFORM yuxi.lease_check(v_run, p_token, v_now);
    IF v_run.status = 'cancel_requested' THEN
        RETURN yuxi.run_finish(p_run_id, p_token, 'cancelled', '[]', NULL, NULL, v_now, p_notify, '[]');
    END IF;
    SELECT a.max_run_attempts INTO v_max FROM yuxi.agents a WHERE a.slug = v_run.agent_slug;
    IF v_run.attempt_count >= coalesce(v_max, 1) THEN
        RETURN yuxi.run_finish(
            p_run_id, p_token, 'failed', '[]', p_error_type, p_error_message, v_now, p_notify,
            jsonb_build_array(jsonb_build_object('event', 'error', 'payload', jsonb_build_object(
                'error_type', p_error_type, 'message', left(p_error_message, 4000)))));
    END IF;
    UPDATE yuxi.agent_runs
    SET status = 'pending', lease_token = NULL, lease_expires_at = NULL, updated_at = v_now,
        delivery_job_id = yuxi.run_redelivery_job(v_run)
    WHERE run_id = p_run_id
    RETURNING * INTO v_run;
    UPDATE yuxi.agent_run_attempts
    SET ended_at = v_now, outcome = 'released',
        detail = left(format('%s: %s', p_error_type, p_error_message), 4000)
    WHERE run_id = p_run_id AND lease_token = p_token;
    PERFORM yuxi.run_cancel_children(p_run_id, v_now);
    PERFORM yuxi.maintenance_count('released_after_error');
    RETURN v_run;
END;
$$;
COMMENT ON FUNCTION yuxi.run_retry(uuid, uuid, text, text, timestamptz, boolean) IS
    'Worker: after an error that is not the run''s own (a lost database connection), gives the run back for another attempt within the agent''s retry budget, else fails it with p_error_type (a cancel_requested run is cancelled). Raises invalid_input (YV001), lease_lost (YL001)';

-- Ends runs whose worker stopped renewing. Safe to run from many processes at once:
-- each run is taken under SKIP LOCKED and re-checked, so it is handled exactly once.
-- A run with attempts left (agents.max_run_attempts) is released to continue from its
-- checkpoint; a cancel_requested run ends cancelled; the rest fail with
-- worker_lease_expired and pause their thread's backlog.
CREATE OR REPLACE FUNCTION yuxi.run_reconcile_expired(p_now timestamptz DEFAULT NULL, p_limit integer DEFAULT 100)
RETURNS TABLE (run_id uuid, status text)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_candidate record;
    v_run yuxi.agent_runs;
    v_max integer;
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
                delivery_job_id = yuxi.run_redelivery_job(v_run)
            WHERE r.run_id = v_run.run_id
            RETURNING * INTO v_run;
            PERFORM yuxi.run_cancel_children(v_run.run_id, v_now);
            v_released := v_released + 1;
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
COMMENT ON FUNCTION yuxi.run_reconcile_expired(timestamptz, integer) IS
    'Maintenance: ends runs whose lease expired (released for another attempt, cancelled, or failed with worker_lease_expired), counted in yuxi.maintenance_counters (lease_expired, lease_released); safe from many processes at once';

-- Creates a child run executed on behalf of a running parent (the task tool), by the
-- parent's worker, in the parent's attempt: a child run has no delivery job, and one
-- given back for another attempt is taken again by its parent (or cancelled with the
-- parent's attempt, yuxi.run_cancel_children). The child's model (yuxi.model_resolve): the child agent's config, then the parent run's
-- model, then the system default; its approval mode is the parent's.
CREATE OR REPLACE FUNCTION yuxi.run_create_subagent(
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
    -- no delivery job: the parent's worker executes its child runs itself
    INSERT INTO yuxi.agent_runs (run_id, thread_id, uid, agent_slug, request_id, run_type,
                                 created_by_run_id, delivery_job_id, input_payload)
    VALUES (v_run_id, v_parent.thread_id, v_parent.uid, p_agent_slug, v_parent.request_id, 'subagent',
            p_parent_run_id, NULL,
            coalesce(p_input, '{}') || jsonb_build_object(
                'model_spec', yuxi.model_resolve(v_agent.config_json,
                                                 p_inherited => v_parent.input_payload ->> 'model_spec'),
                'tool_approval_mode', coalesce(v_parent.input_payload ->> 'tool_approval_mode', 'auto')));
    RETURN v_run_id;
END;
$$;
COMMENT ON FUNCTION yuxi.run_create_subagent(uuid, uuid, text, jsonb, timestamptz) IS
    'Worker: creates a child run of a running parent (the task tool) for a subagent it may use; returns the run id. Raises lease_lost (YL001), illegal_transition (YT001), not_found (YN001)';

-- Pending runs whose delivery is gone: no job, a finished job, or a job whose worker
-- is gone. The recovery scan re-delivers these. A child run has no delivery of its own
-- (its parent's worker executes it).
CREATE OR REPLACE VIEW yuxi.undelivered_runs AS
SELECT r.run_id, r.thread_id, r.created_at, r.delivery_job_id, j.status::text AS job_status
FROM yuxi.agent_runs r
LEFT JOIN public.procrastinate_jobs j ON j.id = r.delivery_job_id
WHERE r.status = 'pending' AND r.run_type <> 'subagent'
  AND (j.id IS NULL
       OR j.status NOT IN ('todo', 'doing')
       OR (j.status = 'doing' AND j.worker_id IS NULL));
COMMENT ON VIEW yuxi.undelivered_runs IS
    'Pending runs whose delivery job is gone (what yuxi.run_redeliver_orphans re-delivers)';
