-- yuxi: delivery, the procrastinate jobs that hand runs to workers, and dispatch, the
-- queue head becoming a run. procrastinate defers jobs through its own SQL function
-- (procrastinate_defer_jobs_v1), so a run and its delivery job commit together.

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
-- is gone. The recovery scan re-delivers these. A child run has no delivery of its own
-- (its parent's worker executes it).
CREATE VIEW yuxi.undelivered_runs AS
SELECT r.run_id, r.thread_id, r.created_at, r.delivery_job_id, j.status::text AS job_status
FROM yuxi.agent_runs r
LEFT JOIN public.procrastinate_jobs j ON j.id = r.delivery_job_id
WHERE r.status = 'pending' AND r.run_type <> 'subagent'
  AND (j.id IS NULL
       OR j.status NOT IN ('todo', 'doing')
       OR (j.status = 'doing' AND j.worker_id IS NULL));
COMMENT ON VIEW yuxi.undelivered_runs IS
    'Pending runs whose delivery job is gone (what yuxi.run_redeliver_orphans re-delivers)';

-- Re-delivers pending runs whose delivery job is gone. Never duplicates a delivery:
-- the run row is locked and the queueing lock admits one waiting job per run. The job
-- that was lost is deleted (nothing will finish it); each re-delivery is counted in
-- yuxi.maintenance_counters: redelivered_stalled when the job was `doing` under a
-- procrastinate worker that was pruned, redelivered_missing otherwise.
CREATE FUNCTION yuxi.run_redeliver_orphans(p_limit integer DEFAULT 100)
RETURNS TABLE (run_id uuid, job_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_candidate uuid;
    v_lost yuxi.undelivered_runs;
    v_missing bigint := 0;
    v_stalled bigint := 0;
BEGIN
    FOR v_candidate IN
        SELECT u.run_id FROM yuxi.undelivered_runs u ORDER BY u.created_at LIMIT p_limit
    LOOP
        PERFORM 1 FROM yuxi.agent_runs r
        WHERE r.run_id = v_candidate AND r.status = 'pending'
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        -- re-checked under the lock: another scan may have just re-delivered it
        SELECT * INTO v_lost FROM yuxi.undelivered_runs u WHERE u.run_id = v_candidate;
        CONTINUE WHEN NOT FOUND;
        CONTINUE WHEN EXISTS (SELECT 1 FROM public.procrastinate_jobs j
                              WHERE j.queueing_lock = 'run:' || v_candidate::text AND j.status = 'todo');
        IF v_lost.job_status = 'doing' THEN
            v_stalled := v_stalled + 1;
        ELSE
            v_missing := v_missing + 1;
        END IF;
        DELETE FROM public.procrastinate_jobs j WHERE j.id = v_lost.delivery_job_id AND j.status <> 'todo';
        run_id := v_candidate;
        UPDATE yuxi.agent_runs r SET delivery_job_id = yuxi.run_delivery_job(v_candidate)
        WHERE r.run_id = v_candidate
        RETURNING r.delivery_job_id INTO job_id;
        RETURN NEXT;
    END LOOP;
    IF v_missing > 0 THEN
        PERFORM yuxi.maintenance_count('redelivered_missing', v_missing);
    END IF;
    IF v_stalled > 0 THEN
        PERFORM yuxi.maintenance_count('redelivered_stalled', v_stalled);
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.run_redeliver_orphans(integer) IS
    'Maintenance: re-delivers pending runs whose delivery job is gone, never duplicating one; counted in yuxi.maintenance_counters (redelivered_missing, redelivered_stalled)';

-- Re-delivers pending runs whose delivery job is `doing` under a procrastinate worker
-- that has sent no heartbeat for p_stalled_seconds: killed (SIGKILL, a lost machine) or
-- cut off from the database between fetching the job and claiming the run, so nothing
-- will claim it. procrastinate's workers heartbeat every 10 s and prune the stalled ones
-- only when a worker starts; this scan does not wait for that. The stalled job is
-- deleted and a new one deferred under the run's row lock, so each stall re-delivers
-- the run once (counted as redelivered_stalled). Should the stalled worker come back
-- after all, run_claim still lets one delivery claim the run.
CREATE FUNCTION yuxi.run_redeliver_stalled(
    p_stalled_seconds double precision DEFAULT 30, p_limit integer DEFAULT 100,
    p_now timestamptz DEFAULT NULL
) RETURNS TABLE (run_id uuid, job_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_before timestamptz;
    v_candidate record;
    v_count bigint := 0;
BEGIN
    IF p_stalled_seconds IS NULL OR p_stalled_seconds <= 0 THEN
        RAISE EXCEPTION 'stalled_seconds must be positive' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_before := coalesce(p_now, clock_timestamp()) - make_interval(secs => p_stalled_seconds);
    FOR v_candidate IN
        SELECT r.run_id, r.delivery_job_id FROM yuxi.agent_runs r
        JOIN public.procrastinate_jobs j ON j.id = r.delivery_job_id
        JOIN public.procrastinate_workers w ON w.id = j.worker_id
        WHERE r.status = 'pending' AND j.status = 'doing' AND w.last_heartbeat < v_before
        ORDER BY r.created_at
        LIMIT p_limit
    LOOP
        PERFORM 1 FROM yuxi.agent_runs r
        WHERE r.run_id = v_candidate.run_id AND r.status = 'pending'
          AND r.delivery_job_id = v_candidate.delivery_job_id
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;  -- claimed, or re-delivered by another scan meanwhile
        DELETE FROM public.procrastinate_jobs j
        WHERE j.id = v_candidate.delivery_job_id AND j.status = 'doing';
        CONTINUE WHEN NOT FOUND;  -- its worker finished it after all
        run_id := v_candidate.run_id;
        UPDATE yuxi.agent_runs r SET delivery_job_id = yuxi.run_delivery_job(v_candidate.run_id)
        WHERE r.run_id = v_candidate.run_id
        RETURNING r.delivery_job_id INTO job_id;
        v_count := v_count + 1;
        RETURN NEXT;
    END LOOP;
    IF v_count > 0 THEN
        PERFORM yuxi.maintenance_count('redelivered_stalled', v_count);
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.run_redeliver_stalled(double precision, integer, timestamptz) IS
    'Maintenance: re-delivers pending runs whose delivery job is doing under a procrastinate worker with no heartbeat for p_stalled_seconds, once per stall (counted as redelivered_stalled). Raises invalid_input (YV001)';

-- Deletes the procrastinate jobs of yuxi's queues that have done their work, so the job
-- table holds the work in flight and no more: jobs that ended (succeeded, failed,
-- cancelled, aborted), and jobs left `doing` that nothing will finish: under a
-- procrastinate worker that is gone (no heartbeat for p_stalled_seconds, or pruned); a
-- delivery whose run ended more than p_stalled_seconds ago, or a maintenance job started
-- more than ten times that ago (its worker lost the connection while recording the end).
-- The delivery of a pending run is left to the re-delivery scans, which replace it
-- first. Returns the number deleted (also counted as delivery_pruned).
CREATE FUNCTION yuxi.delivery_prune(
    p_stalled_seconds double precision DEFAULT 30, p_limit integer DEFAULT 1000,
    p_now timestamptz DEFAULT NULL
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_before timestamptz;
    v_count integer;
BEGIN
    IF p_stalled_seconds IS NULL OR p_stalled_seconds <= 0 THEN
        RAISE EXCEPTION 'stalled_seconds must be positive' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_before := v_now - make_interval(secs => p_stalled_seconds);
    WITH done AS (
        SELECT j.id FROM public.procrastinate_jobs j
        LEFT JOIN public.procrastinate_workers w ON w.id = j.worker_id
        LEFT JOIN yuxi.agent_runs r
            ON j.task_name = 'execute_run' AND r.run_id = (j.args ->> 'run_id')::uuid
        WHERE j.queue_name IN ('yuxi_runs', 'yuxi_maintenance')
          AND (j.status IN ('succeeded', 'failed', 'cancelled', 'aborted')
               OR (j.status = 'doing'
                   AND (w.id IS NULL OR w.last_heartbeat < v_before OR r.finished_at < v_before
                        OR (j.queue_name = 'yuxi_maintenance' AND EXISTS (
                                SELECT 1 FROM public.procrastinate_events e
                                WHERE e.job_id = j.id AND e.type = 'started'
                                  AND e.at < v_now - make_interval(secs => 10 * p_stalled_seconds))))))
          AND NOT coalesce(r.status = 'pending' AND r.delivery_job_id = j.id, false)
        LIMIT p_limit
        FOR UPDATE OF j SKIP LOCKED
    )
    DELETE FROM public.procrastinate_jobs j USING done WHERE j.id = done.id;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count > 0 THEN
        PERFORM yuxi.maintenance_count('delivery_pruned', v_count);
    END IF;
    RETURN v_count;
END;
$$;
COMMENT ON FUNCTION yuxi.delivery_prune(double precision, integer, timestamptz) IS
    'Maintenance: deletes the procrastinate jobs of yuxi''s queues that ended, or that were left doing and nothing will finish (a vanished worker, a run long ended); returns how many (counted as delivery_pruned). Raises invalid_input (YV001)';
