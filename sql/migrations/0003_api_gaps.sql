-- A second resume of a run without a request_id and with a different answer is
-- resume_superseded (409) instead of silently returning the first resume.

-- Resumes the latest top-level run of a thread, which must be interrupted, as a new
-- `resume` run inheriting its model and approval mode. Idempotent: resuming the same
-- run again with the same answer (or the same request_id) returns the resume run already
-- created; another answer is resume_superseded.
CREATE OR REPLACE FUNCTION yuxi.run_resume(
    p_run_id uuid, p_resume jsonb, p_uid uuid DEFAULT NULL, p_request_id text DEFAULT NULL
) RETURNS yuxi.request_info
LANGUAGE plpgsql AS $$
DECLARE
    v_run yuxi.agent_runs;
    v_conv yuxi.conversations;
    v_existing yuxi.agent_runs;
    v_new_run uuid := gen_random_uuid();
BEGIN
    IF p_request_id IS NOT NULL AND NOT yuxi.request_id_is_valid(p_request_id) THEN
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
        -- the request id is the idempotency key: re-sent, it returns the first resume as it
        -- is; without one, only the same answer is a re-send
        IF p_request_id = v_existing.request_id
           OR (p_request_id IS NULL
               AND v_existing.input_payload -> 'resume' = coalesce(p_resume, 'null')) THEN
            RETURN yuxi.request_view(v_existing.request_id);
        END IF;
        IF p_request_id IS NULL THEN
            RAISE EXCEPTION 'run % was already resumed with another answer (request %)',
                p_run_id, v_existing.request_id
                USING ERRCODE = 'YQ004', HINT = 'resume_superseded';
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
COMMENT ON FUNCTION yuxi.run_resume(uuid, jsonb, uuid, text) IS
    'Resumes the thread''s latest run, which must be interrupted, as a new resume run; idempotent for the same answer or request_id, resume_superseded for another answer. Raises invalid_input (YV001), not_found (YN001), request_id_conflict (YQ001), resume_superseded (YQ004), run_not_interrupted (YQ005)';
