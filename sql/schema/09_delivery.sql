-- yuxi: delivery, the procrastinate jobs that hand runs to workers, and dispatch, the
-- queue head becoming a run. procrastinate defers jobs through its own SQL function
-- (procrastinate_defer_jobs_v1), so a run and its delivery job commit together.

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
COMMENT ON FUNCTION yuxi.run_delivery_job(uuid, boolean) IS
    'Internal: the procrastinate job that delivers a run, inserted in the caller''s transaction (a waiting one is reused)';

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
COMMENT ON FUNCTION yuxi.thread_dispatch_head(yuxi.conversations) IS
    'Internal: dispatches the queue head of a locked thread that has no active run; returns the new run or NULL';

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
COMMENT ON VIEW yuxi.undelivered_runs IS
    'Pending runs whose delivery job is gone (what yuxi.run_redeliver_orphans re-delivers)';

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
COMMENT ON FUNCTION yuxi.run_redeliver_orphans(integer) IS
    'Maintenance: re-delivers pending runs whose delivery job is gone, never duplicating one';
