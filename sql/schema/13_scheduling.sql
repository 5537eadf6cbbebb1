-- yuxi: scheduled agent jobs and their occurrences.
--
-- A job fires at most once per slot: unique (job_id, scheduled_for) for scheduled
-- occurrences. Each fire creates a fresh conversation in the job's project and submits
-- the prompt through yuxi.request_submit, the one submit path. Cron arithmetic lives in
-- Python (yuxi/scheduling/cron.py); these functions receive the computed instants.

-- An occurrence with its run's current status, read from the run, never copied.
CREATE FUNCTION yuxi.occurrence_view(p_occurrence yuxi.scheduled_job_occurrences)
RETURNS yuxi.occurrence_info
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_run_id uuid;
    v_run_status text;
BEGIN
    SELECT r.dispatched_run_id, run.status INTO v_run_id, v_run_status
    FROM yuxi.agent_run_requests r
    LEFT JOIN yuxi.agent_runs run ON run.run_id = r.dispatched_run_id
    WHERE r.request_id = p_occurrence.request_id;
    RETURN (p_occurrence.id, p_occurrence.job_id, p_occurrence.scheduled_for,
            p_occurrence.trigger, p_occurrence.status, p_occurrence.thread_id,
            p_occurrence.request_id, v_run_id, v_run_status, p_occurrence.error,
            p_occurrence.created_at)::yuxi.occurrence_info;
END;
$$;
COMMENT ON FUNCTION yuxi.occurrence_view(yuxi.scheduled_job_occurrences) IS
    'Internal: an occurrence with its run and the run''s current status';

-- Why the user may not (any more) run this job's agent in this project; NULL when fine.
CREATE FUNCTION yuxi.job_access_error(p_uid uuid, p_project_id uuid, p_agent_slug text)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM yuxi.users WHERE id = p_uid AND deleted_at IS NULL) THEN
        RETURN 'the job''s user no longer exists';
    ELSIF p_project_id IS NULL OR NOT EXISTS (
              SELECT 1 FROM yuxi.projects
              WHERE id = p_project_id AND uid = p_uid AND deleted_at IS NULL) THEN
        RETURN format('project %s not found', coalesce(p_project_id::text, '(deleted)'));
    ELSIF NOT yuxi.agent_visible_to(p_agent_slug, p_uid) THEN
        RETURN format('agent %s not found', p_agent_slug);
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION yuxi.job_access_error(uuid, uuid, text) IS
    'Internal: why the user may not (any more) run this agent in this project, or NULL';

CREATE FUNCTION yuxi.job_check_access(p_uid uuid, p_project_id uuid, p_agent_slug text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_error text := yuxi.job_access_error(p_uid, p_project_id, p_agent_slug);
BEGIN
    IF v_error IS NOT NULL THEN
        RAISE EXCEPTION '%', v_error USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.job_check_access(uuid, uuid, text) IS
    'Internal: raises not_found (YN001) with the reason of yuxi.job_access_error';

CREATE FUNCTION yuxi.job_check_prompt(p_prompt text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_prompt IS NULL OR p_prompt ~ '^[[:space:]]*$' OR length(p_prompt) > 100000 THEN
        RAISE EXCEPTION 'prompt must be 1-100000 characters and not blank'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.job_check_prompt(text) IS
    'Internal: raises invalid_input (YV001) for a blank or oversized prompt';

CREATE FUNCTION yuxi.job_create(
    p_uid uuid, p_project_id uuid, p_agent_slug text, p_prompt text, p_tool_approval_mode text,
    p_cron text, p_timezone text, p_enabled boolean, p_next_fire_at timestamptz
) RETURNS yuxi.scheduled_agent_jobs
LANGUAGE plpgsql AS $$
DECLARE
    v_job yuxi.scheduled_agent_jobs;
BEGIN
    PERFORM yuxi.job_check_access(p_uid, p_project_id, p_agent_slug);
    PERFORM yuxi.job_check_prompt(p_prompt);
    INSERT INTO yuxi.scheduled_agent_jobs (uid, project_id, agent_slug, prompt, tool_approval_mode,
                                           cron, timezone, enabled, next_fire_at)
    VALUES (p_uid, p_project_id, p_agent_slug, p_prompt, coalesce(p_tool_approval_mode, 'auto'),
            p_cron, p_timezone, coalesce(p_enabled, true), p_next_fire_at)
    RETURNING * INTO v_job;
    RETURN v_job;
END;
$$;
COMMENT ON FUNCTION yuxi.job_create(uuid, uuid, text, text, text, text, text, boolean, timestamptz) IS
    'Creates a scheduled job (the caller computes the next fire time). Raises not_found (YN001), invalid_input (YV001)';

-- The caller's live job, locked; not_found otherwise.
CREATE FUNCTION yuxi.job_lock(p_uid uuid, p_job_id uuid) RETURNS yuxi.scheduled_agent_jobs
LANGUAGE plpgsql AS $$
DECLARE
    v_job yuxi.scheduled_agent_jobs;
BEGIN
    SELECT * INTO v_job FROM yuxi.scheduled_agent_jobs
    WHERE id = p_job_id AND (p_uid IS NULL OR uid = p_uid) AND deleted_at IS NULL
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'scheduled job % not found', p_job_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN v_job;
END;
$$;
COMMENT ON FUNCTION yuxi.job_lock(uuid, uuid) IS
    'Internal: the caller''s live job, locked. Raises not_found (YN001)';

-- The caller's live job (any user's for an operator, p_uid NULL); not_found otherwise.
CREATE FUNCTION yuxi.job_get(p_uid uuid, p_job_id uuid) RETURNS yuxi.scheduled_agent_jobs
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_job yuxi.scheduled_agent_jobs;
BEGIN
    SELECT * INTO v_job FROM yuxi.scheduled_agent_jobs
    WHERE id = p_job_id AND (p_uid IS NULL OR uid = p_uid) AND deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'scheduled job % not found', p_job_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN v_job;
END;
$$;
COMMENT ON FUNCTION yuxi.job_get(uuid, uuid) IS
    'The user''s live job (any user''s for p_uid NULL). Raises not_found (YN001)';

-- The user's live jobs, oldest first.
CREATE FUNCTION yuxi.job_list(p_uid uuid) RETURNS SETOF yuxi.scheduled_agent_jobs
LANGUAGE sql STABLE AS $$
    SELECT * FROM yuxi.scheduled_agent_jobs
    WHERE uid = p_uid AND deleted_at IS NULL
    ORDER BY created_at, id
$$;
COMMENT ON FUNCTION yuxi.job_list(uuid) IS
    'The user''s live jobs, oldest first (created_at, id)';

-- Replaces a job's settings (the caller passes every field, changed or not) and its
-- next fire time, re-validating project ownership and agent visibility.
CREATE FUNCTION yuxi.job_update(
    p_uid uuid, p_job_id uuid, p_project_id uuid, p_agent_slug text, p_prompt text,
    p_tool_approval_mode text, p_cron text, p_timezone text, p_enabled boolean,
    p_next_fire_at timestamptz
) RETURNS yuxi.scheduled_agent_jobs
LANGUAGE plpgsql AS $$
DECLARE
    v_job yuxi.scheduled_agent_jobs;
BEGIN
    PERFORM yuxi.job_lock(p_uid, p_job_id);
    PERFORM yuxi.job_check_access(p_uid, p_project_id, p_agent_slug);
    PERFORM yuxi.job_check_prompt(p_prompt);
    UPDATE yuxi.scheduled_agent_jobs
    SET project_id = p_project_id, agent_slug = p_agent_slug, prompt = p_prompt,
        tool_approval_mode = p_tool_approval_mode, cron = p_cron, timezone = p_timezone,
        enabled = p_enabled, next_fire_at = p_next_fire_at, updated_at = now()
    WHERE id = p_job_id
    RETURNING * INTO v_job;
    RETURN v_job;
END;
$$;
COMMENT ON FUNCTION yuxi.job_update(uuid, uuid, uuid, text, text, text, text, text, boolean, timestamptz) IS
    'Replaces a job''s settings and next fire time, re-checking project and agent. Raises not_found (YN001), invalid_input (YV001)';

-- Soft delete: the job stops firing; its occurrences stay readable by operators.
CREATE FUNCTION yuxi.job_delete(p_uid uuid, p_job_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM yuxi.job_lock(p_uid, p_job_id);
    UPDATE yuxi.scheduled_agent_jobs SET deleted_at = now(), enabled = false, updated_at = now()
    WHERE id = p_job_id;
END;
$$;
COMMENT ON FUNCTION yuxi.job_delete(uuid, uuid) IS
    'Soft-deletes a job: it stops firing. Raises not_found (YN001)';

-- Pause or resume firing (psql: SELECT yuxi.job_set_enabled(NULL, '<id>', false)).
-- Resuming needs the next fire time, which the caller computes from the cron.
CREATE FUNCTION yuxi.job_set_enabled(
    p_uid uuid, p_job_id uuid, p_enabled boolean, p_next_fire_at timestamptz DEFAULT NULL
) RETURNS yuxi.scheduled_agent_jobs
LANGUAGE plpgsql AS $$
DECLARE
    v_job yuxi.scheduled_agent_jobs;
BEGIN
    PERFORM yuxi.job_lock(p_uid, p_job_id);
    UPDATE yuxi.scheduled_agent_jobs
    SET enabled = p_enabled, next_fire_at = coalesce(p_next_fire_at, next_fire_at), updated_at = now()
    WHERE id = p_job_id
    RETURNING * INTO v_job;
    RETURN v_job;
END;
$$;
COMMENT ON FUNCTION yuxi.job_set_enabled(uuid, uuid, boolean, timestamptz) IS
    'Pauses or resumes a job (resuming takes the next fire time). Raises not_found (YN001)';

-- Due jobs for one ticker transaction, locked so concurrent tickers take disjoint sets.
CREATE FUNCTION yuxi.jobs_due(p_now timestamptz, p_limit integer DEFAULT 100)
RETURNS SETOF yuxi.scheduled_agent_jobs
LANGUAGE sql AS $$
    SELECT * FROM yuxi.scheduled_agent_jobs
    WHERE enabled AND deleted_at IS NULL AND next_fire_at <= p_now
    ORDER BY next_fire_at
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED
$$;
COMMENT ON FUNCTION yuxi.jobs_due(timestamptz, integer) IS
    'Ticker: due jobs, locked FOR UPDATE SKIP LOCKED so concurrent tickers take disjoint sets';

-- True while the conversation of the job's latest submitted occurrence still has work
-- in flight: a queued request, a run pending or running, or a run interrupted and
-- waiting for the user (read from the conversation's latest run, so a question that
-- was answered and resumed no longer counts).
CREATE FUNCTION yuxi.job_busy(p_job_id uuid) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce((
        SELECT coalesce(NOT yuxi.run_is_final(last.status), false)
               OR EXISTS (SELECT 1 FROM yuxi.agent_run_requests q
                          WHERE q.thread_id = c.thread_id AND q.status = 'queued')
        FROM yuxi.scheduled_job_occurrences o
        JOIN yuxi.conversations c ON c.thread_id = o.thread_id AND c.status = 'active'
        LEFT JOIN yuxi.agent_runs last ON last.run_id = c.last_run_id
        WHERE o.job_id = p_job_id AND o.status = 'submitted'
        ORDER BY o.created_at DESC
        LIMIT 1
    ), false)
$$
-- planned for each call: a plan cached while the tables were small (e.g. analyzed
-- empty on a fresh install) would keep scanning them whole as they grow
SET plan_cache_mode = force_custom_plan;
COMMENT ON FUNCTION yuxi.job_busy(uuid) IS
    'Internal: true while the job''s latest submitted occurrence still has work in flight';

-- Fires one job: the single path for the ticker (trigger 'schedule', the job locked by
-- jobs_due, p_next_fire_at given) and for "run now" (trigger 'manual', p_uid checked).
-- Records exactly one occurrence: skipped while the previous one is in flight, failed
-- with the reason when the project or agent is no longer available, else submitted
-- with a fresh conversation. A scheduled slot already recorded (another ticker won) is
-- returned as it is. Unknown errors propagate: the caller leaves the slot for the next
-- tick.
CREATE FUNCTION yuxi.job_fire(
    p_job_id uuid, p_trigger text, p_scheduled_for timestamptz,
    p_next_fire_at timestamptz DEFAULT NULL, p_uid uuid DEFAULT NULL
) RETURNS yuxi.occurrence_info
LANGUAGE plpgsql AS $$
DECLARE
    v_job yuxi.scheduled_agent_jobs;
    v_occurrence yuxi.scheduled_job_occurrences;
    v_id uuid := gen_random_uuid();
    v_snapshot jsonb;
    v_error text;
    v_thread uuid;
    v_request text;
BEGIN
    IF p_trigger NOT IN ('schedule', 'manual') THEN
        RAISE EXCEPTION 'trigger is schedule or manual' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_job := yuxi.job_lock(p_uid, p_job_id);
    IF p_trigger = 'schedule' THEN
        SELECT * INTO v_occurrence FROM yuxi.scheduled_job_occurrences
        WHERE job_id = p_job_id AND scheduled_for = p_scheduled_for AND trigger = 'schedule';
        IF FOUND AND v_occurrence.status <> 'pending_retry' THEN
            RETURN yuxi.occurrence_view(v_occurrence);
        ELSIF FOUND THEN
            v_id := v_occurrence.id;  -- a retried slot keeps its occurrence (and request) id
        END IF;
    ELSE
        PERFORM yuxi.job_check_access(v_job.uid, v_job.project_id, v_job.agent_slug);
    END IF;

    v_snapshot := jsonb_build_object(
        'agent_slug', v_job.agent_slug, 'prompt', v_job.prompt,
        'tool_approval_mode', v_job.tool_approval_mode, 'cron', v_job.cron,
        'timezone', v_job.timezone, 'project_id', v_job.project_id);

    IF yuxi.job_busy(p_job_id) THEN
        v_error := 'the previous occurrence is still running';
        INSERT INTO yuxi.scheduled_job_occurrences
            (id, job_id, scheduled_for, trigger, status, config_snapshot, error)
        VALUES (v_id, p_job_id, p_scheduled_for, p_trigger, 'skipped', v_snapshot, v_error)
        ON CONFLICT (job_id, scheduled_for) WHERE trigger = 'schedule'
        DO UPDATE SET status = 'skipped', error = excluded.error, updated_at = clock_timestamp()
        RETURNING * INTO v_occurrence;
    ELSE
        v_error := yuxi.job_access_error(v_job.uid, v_job.project_id, v_job.agent_slug);
        IF v_error IS NULL THEN
            v_thread := (yuxi.thread_create(v_job.uid, v_job.agent_slug, v_job.project_id,
                                            left(btrim(v_job.prompt), 80))).thread_id;
            v_request := (yuxi.request_submit(v_job.uid, v_thread, v_job.prompt, 'sched-' || v_id::text,
                                              'enqueue', NULL, v_job.tool_approval_mode,
                                              'schedule')).request_id;
        END IF;
        INSERT INTO yuxi.scheduled_job_occurrences
            (id, job_id, scheduled_for, trigger, status, config_snapshot, thread_id, request_id, error)
        VALUES (v_id, p_job_id, p_scheduled_for, p_trigger,
                CASE WHEN v_error IS NULL THEN 'submitted' ELSE 'failed' END,
                v_snapshot, v_thread, v_request, v_error)
        ON CONFLICT (job_id, scheduled_for) WHERE trigger = 'schedule'
        DO UPDATE SET status = excluded.status, thread_id = excluded.thread_id,
                      request_id = excluded.request_id, error = excluded.error,
                      config_snapshot = excluded.config_snapshot, updated_at = clock_timestamp()
        RETURNING * INTO v_occurrence;
    END IF;

    UPDATE yuxi.scheduled_agent_jobs
    SET last_fired_at = now(),
        next_fire_at = CASE WHEN p_trigger = 'schedule' THEN coalesce(p_next_fire_at, next_fire_at)
                            ELSE next_fire_at END
    WHERE id = p_job_id;
    RETURN yuxi.occurrence_view(v_occurrence);
END;
$$;
COMMENT ON FUNCTION yuxi.job_fire(uuid, text, timestamptz, timestamptz, uuid) IS
    'Fires a job once for a slot (ticker: schedule; run now: manual): records one occurrence, submitted, skipped or failed. Raises invalid_input (YV001), not_found (YN001)';

-- Records that firing a slot hit an unexpected error; the slot stays due and the next
-- tick tries again (the pending_retry occurrence is then replaced).
CREATE FUNCTION yuxi.job_mark_retry(p_job_id uuid, p_scheduled_for timestamptz, p_error text)
RETURNS void
LANGUAGE sql AS $$
    INSERT INTO yuxi.scheduled_job_occurrences (job_id, scheduled_for, trigger, status, config_snapshot, error)
    SELECT j.id, p_scheduled_for, 'schedule', 'pending_retry',
           jsonb_build_object('agent_slug', j.agent_slug, 'prompt', j.prompt,
                              'tool_approval_mode', j.tool_approval_mode, 'cron', j.cron,
                              'timezone', j.timezone, 'project_id', j.project_id),
           left(p_error, 2000)
    FROM yuxi.scheduled_agent_jobs j WHERE j.id = p_job_id
    ON CONFLICT (job_id, scheduled_for) WHERE trigger = 'schedule'
    DO UPDATE SET error = excluded.error, updated_at = clock_timestamp()
    WHERE yuxi.scheduled_job_occurrences.status = 'pending_retry'
$$;
COMMENT ON FUNCTION yuxi.job_mark_retry(uuid, timestamptz, text) IS
    'Ticker: records that firing a slot hit an unexpected error; the slot stays due';

CREATE FUNCTION yuxi.job_occurrences(p_uid uuid, p_job_id uuid, p_limit integer DEFAULT 100)
RETURNS SETOF yuxi.occurrence_info
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM yuxi.scheduled_agent_jobs
                   WHERE id = p_job_id AND (p_uid IS NULL OR uid = p_uid) AND deleted_at IS NULL) THEN
        RAISE EXCEPTION 'scheduled job % not found', p_job_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN QUERY
    SELECT (yuxi.occurrence_view(o)).*
    FROM yuxi.scheduled_job_occurrences o
    WHERE o.job_id = p_job_id
    ORDER BY o.created_at DESC, o.id
    LIMIT p_limit;
END;
$$;
COMMENT ON FUNCTION yuxi.job_occurrences(uuid, uuid, integer) IS
    'A job''s occurrences, newest first. Raises not_found (YN001)';

-- Operators: jobs that are due now, and jobs whose latest occurrence failed.
CREATE VIEW yuxi.due_jobs AS
SELECT j.id, j.uid, j.agent_slug, j.cron, j.timezone, j.next_fire_at, j.last_fired_at
FROM yuxi.scheduled_agent_jobs j
WHERE j.enabled AND j.deleted_at IS NULL AND j.next_fire_at <= now();
COMMENT ON VIEW yuxi.due_jobs IS
    'Enabled, live scheduled jobs that are due now';

CREATE VIEW yuxi.failing_jobs AS
SELECT j.id, j.uid, j.agent_slug, o.scheduled_for, o.status, o.error, o.created_at AS failed_at
FROM yuxi.scheduled_agent_jobs j
JOIN LATERAL (
    SELECT * FROM yuxi.scheduled_job_occurrences o
    WHERE o.job_id = j.id ORDER BY o.created_at DESC LIMIT 1
) o ON true
WHERE j.deleted_at IS NULL AND o.status IN ('failed', 'pending_retry');
COMMENT ON VIEW yuxi.failing_jobs IS
    'Live scheduled jobs whose latest occurrence failed or waits for a retry';

-- A job whose cron or time zone can no longer be evaluated (edited by hand, or a zone
-- that disappeared): its due slot is recorded failed with the reason and the job is
-- disabled, so it neither blocks the ticker nor fires wrongly.
CREATE FUNCTION yuxi.job_disable_invalid(p_job_id uuid, p_scheduled_for timestamptz, p_error text)
RETURNS void
LANGUAGE sql AS $$
    INSERT INTO yuxi.scheduled_job_occurrences (job_id, scheduled_for, trigger, status, config_snapshot, error)
    SELECT j.id, p_scheduled_for, 'schedule', 'failed',
           jsonb_build_object('agent_slug', j.agent_slug, 'prompt', j.prompt,
                              'tool_approval_mode', j.tool_approval_mode, 'cron', j.cron,
                              'timezone', j.timezone, 'project_id', j.project_id),
           left(p_error || '; the job was disabled', 2000)
    FROM yuxi.scheduled_agent_jobs j WHERE j.id = p_job_id
    ON CONFLICT (job_id, scheduled_for) WHERE trigger = 'schedule'
    DO UPDATE SET status = 'failed', error = excluded.error, updated_at = clock_timestamp();
    UPDATE yuxi.scheduled_agent_jobs SET enabled = false, updated_at = now() WHERE id = p_job_id;
$$;
COMMENT ON FUNCTION yuxi.job_disable_invalid(uuid, timestamptz, text) IS
    'Ticker: records a job''s due slot failed (cron or zone no longer valid) and disables the job';
