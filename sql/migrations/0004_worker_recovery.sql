-- Worker recovery: workers that outlive their database connections, deliveries that
-- cannot stall, idempotent event appends, and counters of the maintenance passes.
--
-- maintenance_counters: what the lease reconciler, the re-delivery scans, the job pruning
-- and run_retry did, incremented in their own transactions, for operators' metrics.
-- agent_runs.last_event_batch + run_append_batch: an event batch re-sent after a lost
-- reply is skipped (run_append_events appends through it, unkeyed).
-- run_retry: a run cut by a lost connection goes back within its retry budget.
-- run_redeliver_stalled, delivery_prune: a delivery held by a worker with no heartbeat is
-- re-delivered; jobs that did their work are deleted.

-- What the maintenance passes did, for operators' metrics. Each count is incremented
-- in the transaction that does the work (yuxi.maintenance_count), so it never disagrees
-- with the rows; values only grow, from the database's creation.
CREATE TABLE yuxi.maintenance_counters (
    name   text PRIMARY KEY CHECK (name ~ '^[a-z][a-z_]{0,62}$'),
    value  bigint NOT NULL DEFAULT 0 CHECK (value >= 0)
);
INSERT INTO yuxi.maintenance_counters (name, value) VALUES
    ('lease_expired', 0),
    ('lease_released', 0),
    ('redelivered_missing', 0),
    ('redelivered_stalled', 0),
    ('released_after_error', 0),
    ('delivery_pruned', 0);
COMMENT ON TABLE yuxi.maintenance_counters IS
    'Counts of maintenance work since the database was created: lease_expired (leases the reconciler ended), lease_released (of those, runs put back to pending for another attempt), redelivered_missing (pending runs re-delivered because their job was missing or finished), redelivered_stalled (pending runs re-delivered because their job''s worker stopped), released_after_error (runs a worker gave back for another attempt after losing its database connection, yuxi.run_retry), delivery_pruned (finished or abandoned procrastinate jobs deleted, yuxi.delivery_prune)';


ALTER TABLE yuxi.agent_runs ADD COLUMN last_event_batch bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN yuxi.agent_runs.last_event_batch IS
    'The number of the last event batch the current attempt appended (yuxi.run_append_batch); reset by each claim';


-- Adds p_by to an operator's counter (yuxi.maintenance_counters), in the caller's
-- transaction: the count commits, or rolls back, with the work it counts.
CREATE OR REPLACE FUNCTION yuxi.maintenance_count(p_name text, p_by bigint DEFAULT 1) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO yuxi.maintenance_counters AS c (name, value) VALUES (p_name, p_by)
    ON CONFLICT (name) DO UPDATE SET value = c.value + EXCLUDED.value
$$;
COMMENT ON FUNCTION yuxi.maintenance_count(text, bigint) IS
    'Internal: adds p_by to the counter p_name of yuxi.maintenance_counters, in the caller''s transaction';


-- Claims a pending run: a new attempt with a fresh lease token. A duplicate delivery
-- finds the run no longer pending and gets run_not_claimable; nothing runs twice.
CREATE OR REPLACE FUNCTION yuxi.run_claim(
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
        attempt_count = attempt_count + 1, started_at = coalesce(started_at, v_now), updated_at = v_now,
        last_event_batch = 0
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
COMMENT ON FUNCTION yuxi.run_claim(uuid, text, double precision, timestamptz) IS
    'Worker: claims a pending run under a new lease and attempt. Raises invalid_input (YV001), not_found (YN001), run_not_claimable (YQ010)';


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
        delivery_job_id = yuxi.run_delivery_job(p_run_id)
    WHERE run_id = p_run_id
    RETURNING * INTO v_run;
    UPDATE yuxi.agent_run_attempts
    SET ended_at = v_now, outcome = 'released',
        detail = left(format('%s: %s', p_error_type, p_error_message), 4000)
    WHERE run_id = p_run_id AND lease_token = p_token;
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
                delivery_job_id = yuxi.run_delivery_job(v_run.run_id)
            WHERE r.run_id = v_run.run_id
            RETURNING * INTO v_run;
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


-- Re-delivers pending runs whose delivery job is gone. Never duplicates a delivery:
-- the run row is locked and the queueing lock admits one waiting job per run. The job
-- that was lost is deleted (nothing will finish it); each re-delivery is counted in
-- yuxi.maintenance_counters: redelivered_stalled when the job was `doing` under a
-- procrastinate worker that was pruned, redelivered_missing otherwise.
CREATE OR REPLACE FUNCTION yuxi.run_redeliver_orphans(p_limit integer DEFAULT 100)
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
CREATE OR REPLACE FUNCTION yuxi.run_redeliver_stalled(
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
CREATE OR REPLACE FUNCTION yuxi.delivery_prune(
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


-- Appends events ([{event, payload}, ...]) with gap-free seqs as the lease holder; returns
-- the last seq. `end` is written only when the run finishes, so there is exactly one.
-- p_batch numbers the attempt's batches (1, 2, ...; each claim starts again): a batch
-- whose number is not above the last one stored is already there and is skipped, so a
-- worker that lost the reply to a committed append re-sends it without storing it
-- twice. NULL appends without that check (yuxi.run_append_events).
-- p_notify => false: the caller sends the yuxi_run_events NOTIFY itself right after
-- commit. PostgreSQL serialises the commits of all transactions that NOTIFY, disk flush
-- included, so the hot paths of a worker notify from a transaction of their own.
CREATE OR REPLACE FUNCTION yuxi.run_append_batch(
    p_run_id uuid, p_token uuid, p_batch bigint, p_events jsonb, p_now timestamptz DEFAULT NULL,
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
    IF p_batch < 1 THEN
        RAISE EXCEPTION 'batch numbers start at 1' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_count := jsonb_array_length(p_events);
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(p_events) e WHERE e ->> 'event' = 'end') THEN
        RAISE EXCEPTION 'the end event is written by run_finish' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    -- The row lock taken by this UPDATE serialises appenders of one run.
    UPDATE yuxi.agent_runs
    SET last_event_seq = last_event_seq + v_count,
        last_event_batch = coalesce(p_batch, last_event_batch)
    WHERE run_id = p_run_id AND lease_token = p_token AND lease_expires_at > v_now
      AND yuxi.run_is_leased(status) AND (p_batch IS NULL OR last_event_batch < p_batch)
    RETURNING last_event_seq INTO v_last;
    IF NOT FOUND THEN
        -- raises the precise error; a lease that holds means the batch is stored already
        RETURN (yuxi.run_lock_leased(p_run_id, p_token, v_now)).last_event_seq;
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
COMMENT ON FUNCTION yuxi.run_append_batch(uuid, uuid, bigint, jsonb, timestamptz, boolean) IS
    'Worker: appends the attempt''s event batch number p_batch ([{event, payload}]) with gap-free seqs, skipping a batch already stored (a re-send after a lost reply); returns the last seq. Raises invalid_input (YV001), lease_lost (YL001)';


-- yuxi.run_append_batch without a batch number: every call appends.
CREATE OR REPLACE FUNCTION yuxi.run_append_events(
    p_run_id uuid, p_token uuid, p_events jsonb, p_now timestamptz DEFAULT NULL,
    p_notify boolean DEFAULT true
) RETURNS bigint
LANGUAGE sql AS $$
    SELECT yuxi.run_append_batch(p_run_id, p_token, NULL, p_events, p_now, p_notify)
$$;
COMMENT ON FUNCTION yuxi.run_append_events(uuid, uuid, jsonb, timestamptz, boolean) IS
    'Appends events [{event, payload}] with gap-free seqs as the lease holder (yuxi.run_append_batch without a batch number: a re-send is stored again); returns the last seq. Raises invalid_input (YV001), lease_lost (YL001)';
