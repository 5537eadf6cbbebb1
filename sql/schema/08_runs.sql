-- yuxi: runs: reading one, what a worker reads to execute it, its lease, ending it,
-- cancelling, resuming, child runs, and the reconciliation of expired leases.
-- Conventions (error codes, lock order, p_uid, p_now): 00_vocabulary.sql.
--
-- A worker preparing a run reads the database once (run_execution_input also returns
-- the subagents the run's user can see) and commits the manifest and re-reads the run's
-- identity in one call (run_commit_manifest): the executor's last check before the
-- graph starts.

-- ---------------------------------------------------------------------------------
-- Reading

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
COMMENT ON FUNCTION yuxi.run_get(uuid, uuid) IS
    'A run for its owner (p_uid) or an operator (NULL). Raises not_found (YN001)';

-- The resources a user may use, as a run's preparation reads them (the catalog of
-- yuxi/resources.py): {knowledge_bases: [{id, name, slug}], skills: [rows of
-- yuxi.skills_usable], mcp_servers: [{id, slug, name, transport, version}]}. PL/pgSQL, so that this file may name what later files define.
CREATE FUNCTION yuxi.run_catalog(p_uid uuid) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN jsonb_build_object(
        'knowledge_bases', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                               'id', k.id, 'name', k.name, 'slug', k.slug)
                                           ORDER BY k.id), '[]')
                            FROM yuxi.knowledge_bases k WHERE yuxi.kb_may_read(k, p_uid)),
        'skills', (SELECT coalesce(jsonb_agg(to_jsonb(s) ORDER BY s.slug), '[]')
                   FROM yuxi.skills_usable(p_uid) s),
        -- never their secrets: the worker reads those again where it connects
        'mcp_servers', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                          'id', m.id, 'slug', m.slug, 'name', m.name,
                                          'transport', m.transport, 'version', m.updated_at)
                                      ORDER BY m.slug), '[]')
                        FROM yuxi.mcp_server_connections(p_uid) m));
END;
$$;
COMMENT ON FUNCTION yuxi.run_catalog(uuid) IS
    'Internal (yuxi.run_execution_input): the knowledge bases, shared skills and MCP servers (without secrets) a user may use, as a run''s preparation reads them';

-- Everything the executor needs about a run, its conversation, agent and project, in
-- one read. `identity_error` is NULL when the run may execute, else why it may not:
-- the run needs a live conversation that belongs to the run's user and is bound to the
-- run's agent (subagent runs: the parent's conversation), and an agent the user can see.
CREATE FUNCTION yuxi.run_execution_input(p_run_id uuid)
RETURNS TABLE (
    run_id             uuid,
    thread_id          uuid,
    uid                uuid,
    request_id         text,
    run_type           text,
    created_by_run_id  uuid,
    agent_slug         text,
    backend_id         text,
    agent_config       jsonb,
    agent_updated_at   timestamptz,
    project_id         uuid,
    workdir_path       text,
    input_text         text,
    input_payload      jsonb,
    identity_error     text,
    visible_subagents  text[],
    attachments        jsonb,
    model              jsonb,
    model_key_sealed   bytea,
    input_attachments  jsonb,
    catalog            jsonb
)
LANGUAGE sql STABLE AS $$
    SELECT r.run_id, r.thread_id, r.uid, r.request_id, r.run_type, r.created_by_run_id,
           r.agent_slug, a.backend_id, a.config_json, a.updated_at, c.project_id, p.workdir_path,
           m.content, r.input_payload,
           CASE
               WHEN r.thread_id IS NULL OR r.request_id IS NULL OR r.request_id = '' THEN
                   'the run has no thread or request identity'
               WHEN c.thread_id IS NULL OR c.status <> 'active' THEN
                   format('conversation %s no longer exists', r.thread_id)
               WHEN c.uid <> r.uid THEN
                   format('conversation %s does not belong to the run''s user', r.thread_id)
               WHEN r.run_type <> 'subagent' AND c.agent_slug <> r.agent_slug THEN
                   format('conversation %s is bound to agent %s, not %s', r.thread_id, c.agent_slug, r.agent_slug)
               WHEN a.slug IS NULL OR NOT yuxi.agent_visible_to(r.agent_slug, r.uid) THEN
                   format('agent %s is not available to the run''s user', r.agent_slug)
               WHEN c.project_id IS NOT NULL AND (p.id IS NULL OR p.deleted_at IS NOT NULL) THEN
                   format('project %s of conversation %s no longer exists', c.project_id, r.thread_id)
           END,
           ARRAY(SELECT s FROM yuxi.subagents_visible_to(r.uid) s),
           yuxi.thread_attachments_json(r.thread_id),
           to_jsonb(mo) - 'api_key_sealed' - 'api_key_hint', mo.api_key_sealed,
           m.metadata -> 'attachments', yuxi.run_catalog(r.uid)
    FROM yuxi.agent_runs r
    LEFT JOIN yuxi.conversations c ON c.thread_id = r.thread_id
    LEFT JOIN yuxi.agents a ON a.slug = r.agent_slug AND a.deleted_at IS NULL
    LEFT JOIN yuxi.projects p ON p.id = c.project_id
    LEFT JOIN yuxi.messages m ON m.id = r.input_message_id
    LEFT JOIN LATERAL yuxi.model_for_user(r.uid, r.input_payload->>'model_spec') mo ON true
    WHERE r.run_id = p_run_id
$$;
COMMENT ON FUNCTION yuxi.run_execution_input(uuid) IS
    'Worker: everything needed to execute a run, in one read; identity_error says why the run may not execute (NULL when it may); attachments are the thread''s files under uploads/; model is the registry row of the run''s model_spec (without its key; NULL when it has none) and model_key_sealed its sealed key; input_attachments the ids of the attachments its input message refers to; catalog the resources its user may use (yuxi.run_catalog)';

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

-- The executor's claim: yuxi.run_claim and yuxi.run_execution_input in one call. Its
-- commit does not wait for the WAL flush (synchronous_commit off for this transaction):
-- nothing a run does leaves its worker before the manifest's commit, which is
-- synchronous and whose flush makes this claim durable too. A crash of the database
-- before that loses the claim with everything after it: the run is pending again and
-- its next delivery claims it as if for the first time.
CREATE FUNCTION yuxi.run_claim_execution(
    p_run_id uuid, p_worker text, p_lease_seconds double precision, p_now timestamptz DEFAULT NULL
) RETURNS TABLE (
    run_id               uuid,
    thread_id            uuid,
    uid                  uuid,
    agent_slug           text,
    request_id           text,
    run_type             text,
    created_by_run_id    uuid,
    input_message_id     bigint,
    input_payload        jsonb,
    lease_token          uuid,
    lease_expires_at     timestamptz,
    attempt_no           integer,
    started_at           timestamptz,
    manifest_fingerprint text,
    backend_id           text,
    agent_config         jsonb,
    agent_updated_at     timestamptz,
    project_id           uuid,
    workdir_path         text,
    input_text           text,
    identity_error       text,
    visible_subagents    text[],
    attachments          jsonb,
    model                jsonb,
    model_key_sealed     bytea,
    input_attachments    jsonb,
    catalog              jsonb,
    credit_hold          numeric,
    credit_error         text,
    file_trees           jsonb
)
LANGUAGE plpgsql AS $$
DECLARE
    v_claim yuxi.claimed_run;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    v_claim := yuxi.run_claim(p_run_id, p_worker, p_lease_seconds, p_now);
    RETURN QUERY
    SELECT v_claim.run_id, v_claim.thread_id, v_claim.uid, v_claim.agent_slug, v_claim.request_id,
           v_claim.run_type, v_claim.created_by_run_id, v_claim.input_message_id,
           v_claim.input_payload, v_claim.lease_token, v_claim.lease_expires_at,
           v_claim.attempt_no, v_claim.started_at, v_claim.manifest_fingerprint,
           i.backend_id, i.agent_config, i.agent_updated_at, i.project_id, i.workdir_path,
           i.input_text, i.identity_error, i.visible_subagents, i.attachments, i.model,
           i.model_key_sealed, i.input_attachments, i.catalog, f.hold, f.error,
           yuxi.run_file_trees(v_claim.uid, v_claim.thread_id)
    FROM yuxi.run_execution_input(p_run_id) i
    CROSS JOIN LATERAL yuxi.credit_freeze(p_run_id, v_claim.uid, i.model) f;
END;
$$;
COMMENT ON FUNCTION yuxi.run_claim_execution(uuid, text, double precision, timestamptz) IS
    'Worker: yuxi.run_claim and yuxi.run_execution_input in one call, with the run''s credit freeze (yuxi.credit_freeze: credit_hold, or credit_error when the balance cannot cover it) and its file trees (yuxi.run_file_trees), committed without waiting for the WAL flush (the manifest''s synchronous commit makes it durable). Raises as yuxi.run_claim';

-- Raises lease_lost unless p_token holds an unexpired lease on the locked run p_run.
CREATE FUNCTION yuxi.lease_check(p_run yuxi.agent_runs, p_token uuid, p_now timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT yuxi.run_is_leased(p_run.status) OR p_run.lease_token IS DISTINCT FROM p_token
       OR p_run.lease_expires_at <= p_now THEN
        RAISE EXCEPTION 'lease on run % is lost (run is %)', p_run.run_id, p_run.status
            USING ERRCODE = 'YL001', HINT = 'lease_lost';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.lease_check(yuxi.agent_runs, uuid, timestamptz) IS
    'Internal: raises lease_lost (YL001) unless p_token holds an unexpired lease on the locked run p_run';

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
COMMENT ON FUNCTION yuxi.run_lock_leased(uuid, uuid, timestamptz) IS
    'Internal: locks a run for its lease holder. Raises not_found (YN001), lease_lost (YL001)';

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
      AND yuxi.run_is_leased(r.status)
    RETURNING r.status, r.lease_expires_at INTO status, lease_expires_at;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'lease on run % is lost', p_run_id USING ERRCODE = 'YL001', HINT = 'lease_lost';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.run_renew_lease(uuid, uuid, double precision, timestamptz) IS
    'Worker: extends the lease; returns the run''s status (cancel_requested tells the holder to stop). Raises invalid_input (YV001), lease_lost (YL001)';

-- Write-once: the first fingerprint stays; an equal one is accepted (a retry that
-- derived the same manifest); a different one raises and changes nothing.
CREATE FUNCTION yuxi.run_write_manifest(
    p_run_id uuid, p_token uuid, p_manifest jsonb, p_fingerprint text, p_now timestamptz DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    -- the one definition of the write-once rule is yuxi.run_commit_manifest's
    RETURN (SELECT c.fingerprint
            FROM yuxi.run_commit_manifest(p_run_id, p_token, p_manifest, p_fingerprint,
                                          p_now => p_now) c);
END;
$$;
COMMENT ON FUNCTION yuxi.run_write_manifest(uuid, uuid, jsonb, text, timestamptz) IS
    'Worker: stores the run''s manifest once; an equal fingerprint is accepted again. Raises invalid_input (YV001), lease_lost (YL001), manifest_conflict (YM001)';

-- Writes the manifest under the lease, once (the first fingerprint stays, an equal one
-- is accepted, a different one raises manifest_conflict and changes nothing), and reads
-- the run's identity as it stands now that preparation is over: a conversation deleted,
-- an agent hidden or its backend changed meanwhile shows here. When the
-- identity holds (no identity_error, the backend still p_backend_id), the attempt's
-- first events (its `metadata`) are appended in the same transaction as its batch
-- p_batch (a batch already stored is skipped, as yuxi.run_append_batch does), without a
-- NOTIFY: the worker announces them later, with its next batch or the run's end, or on
-- their own if neither comes soon. last_event_seq: the run's last seq after the call.
-- The run's row is updated once: a second update of a row this transaction already
-- updated would check its foreign keys again, locking the conversation after the run,
-- against the global lock order (a cancel holding the conversation would deadlock).
CREATE FUNCTION yuxi.run_commit_manifest(
    p_run_id uuid, p_token uuid, p_manifest jsonb, p_fingerprint text,
    p_backend_id text DEFAULT NULL, p_events jsonb DEFAULT '[]', p_batch bigint DEFAULT NULL,
    p_now timestamptz DEFAULT NULL
) RETURNS TABLE (fingerprint text, identity_error text, backend_id text, last_event_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_run yuxi.agent_runs;
    v_events jsonb := coalesce(p_events, '[]');
    v_count integer := 0;
BEGIN
    IF p_manifest IS NULL OR p_fingerprint IS NULL OR p_fingerprint !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'manifest and a sha-256 hex fingerprint are required'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF jsonb_typeof(v_events) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'events must be a JSON array' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF jsonb_array_length(v_events) > 0 AND (p_batch IS NULL OR p_batch < 1) THEN
        RAISE EXCEPTION 'events need a batch number from 1' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(v_events) e WHERE e ->> 'event' = 'end') THEN
        RAISE EXCEPTION 'the end event is written by run_finish' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_run := yuxi.run_lock_leased(p_run_id, p_token, coalesce(p_now, clock_timestamp()));
    IF v_run.manifest_fingerprint IS NOT NULL AND v_run.manifest_fingerprint <> p_fingerprint THEN
        RAISE EXCEPTION 'run % already has manifest %; this attempt derived %',
            p_run_id, v_run.manifest_fingerprint, p_fingerprint
            USING ERRCODE = 'YM001', HINT = 'manifest_conflict';
    END IF;
    fingerprint := coalesce(v_run.manifest_fingerprint, p_fingerprint);
    SELECT i.identity_error, i.backend_id INTO identity_error, backend_id
    FROM yuxi.run_execution_input(p_run_id) i;
    IF identity_error IS NULL AND backend_id IS NOT DISTINCT FROM p_backend_id
       AND v_run.last_event_batch < coalesce(p_batch, 0) THEN
        v_count := jsonb_array_length(v_events);
    END IF;
    last_event_seq := v_run.last_event_seq;
    IF v_run.manifest_fingerprint IS NULL OR v_count > 0 THEN
        UPDATE yuxi.agent_runs r
        SET manifest = coalesce(r.manifest, p_manifest),
            manifest_fingerprint = coalesce(r.manifest_fingerprint, p_fingerprint),
            last_event_seq = r.last_event_seq + v_count,
            last_event_batch = CASE WHEN v_count > 0 THEN p_batch ELSE r.last_event_batch END
        WHERE r.run_id = p_run_id
        RETURNING r.last_event_seq INTO last_event_seq;
    END IF;
    IF v_count > 0 THEN
        INSERT INTO yuxi.run_events (run_id, seq, event, payload)
        SELECT p_run_id, last_event_seq - v_count + e.ord, e.value ->> 'event',
               coalesce(e.value -> 'payload', '{}')
        FROM jsonb_array_elements(v_events) WITH ORDINALITY AS e(value, ord);
    END IF;
    RETURN NEXT;
END;
$$;
COMMENT ON FUNCTION yuxi.run_commit_manifest(uuid, uuid, jsonb, text, text, jsonb, bigint, timestamptz) IS
    'Worker: writes the manifest once under the lease, reads the run''s identity_error and backend as they stand now and, while they hold, appends p_events as batch p_batch (no NOTIFY), updating the run''s row once. Raises invalid_input (YV001), lease_lost (YL001), manifest_conflict (YM001)';

-- ---------------------------------------------------------------------------------
-- Ending runs

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
COMMENT ON FUNCTION yuxi.run_lock(uuid, uuid) IS
    'Internal: locks a run''s conversation, then the run (the global lock order). Raises not_found (YN001)';

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
    IF yuxi.run_is_final(p_run.status) THEN
        PERFORM yuxi.run_request_cancel(c.run_id, NULL, p_run.finished_at)
        FROM yuxi.agent_runs c
        WHERE c.created_by_run_id = p_run.run_id AND c.run_type = 'subagent'
          AND yuxi.run_is_cancellable(c.status);
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
COMMENT ON FUNCTION yuxi.run_settle(yuxi.agent_runs, boolean, boolean) IS
    'Internal: what follows a run reaching an outcome, in the same transaction: its end event, the input message''s delivery status, its children, the thread''s queue';

-- Ends a run as its lease holder. p_messages ([{role, content, metadata?}, ...]) are
-- stored as the run's output; `completed` needs at least one assistant message.
-- p_notify: as for run_append_events. p_events ([{event, payload}, ...]): the run's last
-- events, appended before its `end` in the same transaction (one round trip fewer).
CREATE FUNCTION yuxi.run_finish(
    p_run_id uuid, p_token uuid, p_status text, p_messages jsonb DEFAULT '[]',
    p_error_type text DEFAULT NULL, p_error_message text DEFAULT NULL, p_now timestamptz DEFAULT NULL,
    p_notify boolean DEFAULT true, p_events jsonb DEFAULT '[]', p_usage jsonb DEFAULT '[]'
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
    IF p_status IS NULL OR NOT (yuxi.run_is_final(p_status) OR p_status = 'interrupted') THEN
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
    -- before the status changes: ending, the run settles its credits on this cost
    PERFORM yuxi.run_record_usage(v_run, p_usage);

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
COMMENT ON FUNCTION yuxi.run_finish(uuid, uuid, text, jsonb, text, text, timestamptz, boolean, jsonb, jsonb) IS
    'Worker: ends a run completed, failed, cancelled or interrupted with its output messages, last events and token usage, and moves the thread''s queue on. Raises invalid_input (YV001), lease_lost (YL001), illegal_transition (YT001)';

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
          AND yuxi.run_is_cancellable(status)
    LOOP
        PERFORM yuxi.run_request_cancel(v_child, NULL, v_now);
    END LOOP;
    RETURN (SELECT status FROM yuxi.agent_runs WHERE run_id = p_run_id);
END;
$$;
COMMENT ON FUNCTION yuxi.run_request_cancel(uuid, uuid, timestamptz) IS
    'Cancels a run and its child runs: pending or interrupted ones at once, running ones become cancel_requested. Returns the run''s status. Raises not_found (YN001)';

-- ---------------------------------------------------------------------------------
-- Resume and subagents

-- Resumes the latest top-level run of a thread, which must be interrupted, as a new
-- `resume` run inheriting its model and approval mode. Idempotent: resuming the same
-- run again with the same answer (or the same request_id) returns the resume run already
-- created; another answer is resume_superseded.
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

-- Creates a child run executed on behalf of a running parent (the task tool), by the
-- parent's worker, in the parent's attempt: a child run has no delivery job, and one
-- given back for another attempt is taken again by its parent (or cancelled with the
-- parent's attempt, yuxi.run_cancel_children). The child's model (yuxi.model_resolve): the child agent's config, then the parent run's
-- model, then the system default; its approval mode is the parent's.
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

-- ---------------------------------------------------------------------------------
-- Maintenance

-- Adds p_by to an operator's counter (yuxi.maintenance_counters), in the caller's
-- transaction: the count commits, or rolls back, with the work it counts.
CREATE FUNCTION yuxi.maintenance_count(p_name text, p_by bigint DEFAULT 1) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO yuxi.maintenance_counters AS c (name, value) VALUES (p_name, p_by)
    ON CONFLICT (name) DO UPDATE SET value = c.value + EXCLUDED.value
$$;
COMMENT ON FUNCTION yuxi.maintenance_count(text, bigint) IS
    'Internal: adds p_by to the counter p_name of yuxi.maintenance_counters, in the caller''s transaction';

CREATE VIEW yuxi.expired_run_leases AS
SELECT r.run_id, r.thread_id, r.status, r.lease_owner, r.lease_expires_at, r.attempt_count
FROM yuxi.agent_runs r
WHERE yuxi.run_is_leased(r.status) AND r.lease_expires_at <= clock_timestamp();
COMMENT ON VIEW yuxi.expired_run_leases IS
    'Leased runs whose lease has expired (what yuxi.run_reconcile_expired ends)';

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

-- A run's outcome: its status, the text of its final assistant message, its error.
CREATE FUNCTION yuxi.run_result(p_run_id uuid, p_uid uuid DEFAULT NULL)
RETURNS TABLE (status text, output text, final_message_id bigint, error_type text, error_message text,
               usage jsonb)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_run yuxi.agent_runs;
BEGIN
    v_run := yuxi.run_get(p_run_id, p_uid);
    RETURN QUERY
    SELECT v_run.status, m.content, v_run.output_message_id, v_run.error_type, v_run.error_message,
           yuxi.run_usage_json(p_run_id)
    FROM (SELECT 1) one
    LEFT JOIN yuxi.messages m ON m.id = v_run.output_message_id;
END;
$$;
COMMENT ON FUNCTION yuxi.run_result(uuid, uuid) IS
    'A run''s status, final assistant text, error and token usage. Raises not_found (YN001)';

-- Raises lease_lost unless p_token holds an unexpired lease on run p_run_id of user
-- p_uid. A worker calls it before a side effect outside the database that must stop
-- with the lease (a memory tool writing the user's agents/MEMORY.md). It reads without
-- locking: the holder only asks whether it still holds the lease.
CREATE FUNCTION yuxi.run_check_lease(
    p_run_id uuid, p_token uuid, p_uid uuid, p_now timestamptz DEFAULT NULL
)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_run yuxi.agent_runs;
BEGIN
    SELECT * INTO v_run FROM yuxi.agent_runs WHERE run_id = p_run_id AND uid = p_uid;
    IF NOT FOUND THEN
        -- an unknown run and another user's run look the same: the lease is not held
        RAISE EXCEPTION 'lease on run % is lost (no such run of this user)', p_run_id
            USING ERRCODE = 'YL001', HINT = 'lease_lost';
    END IF;
    PERFORM yuxi.lease_check(v_run, p_token, coalesce(p_now, clock_timestamp()));
END;
$$;
COMMENT ON FUNCTION yuxi.run_check_lease(uuid, uuid, uuid, timestamptz) IS
    'Worker: raises lease_lost (YL001) unless p_token holds an unexpired lease on run p_run_id of user p_uid; checked before a memory tool reads or writes agents/MEMORY.md';

-- ---------------------------------------------------------------------------------
-- Tool calls applied at most once

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
