-- The manifest's commit also appends the attempt's first events (its `metadata`), so a
-- run no longer makes an append of its own for them, nor a commit waiting for the disk;
-- an SSE stream's first read returns its init event and its first events together
-- (yuxi.run_stream_open); agent_runs leaves room on its pages for HOT updates.

-- Room on each page for a run's updates that change no indexed column (its manifest, its
-- event batches) to be HOT: written beside the row, no index touched. Rows already
-- stored keep their pages until rewritten.
ALTER TABLE yuxi.agent_runs SET (fillfactor = 70);

DROP FUNCTION yuxi.run_commit_manifest(uuid, uuid, jsonb, text);

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

-- The first read of a run's SSE stream, for its owner (p_uid) or an operator (NULL):
-- with p_init, first the stream's `init` row (seq 0: the run's input as stored, the
-- payload yuxi.run_input describes, as JSON text), then yuxi.run_stream_read's rows.
-- STABLE, so every row comes from one snapshot. Raises not_found (YN001) for a run
-- that is not the user's.
CREATE FUNCTION yuxi.run_stream_open(
    p_run_id uuid, p_uid uuid, p_after bigint, p_limit integer DEFAULT 1000,
    p_init boolean DEFAULT true
) RETURNS TABLE (seq bigint, event text, payload text, run_status text, last_event_seq bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_run yuxi.agent_runs;
BEGIN
    v_run := yuxi.run_get(p_run_id, p_uid);
    IF p_init THEN
        RETURN QUERY
        SELECT 0::bigint, 'init'::text,
               json_build_object('run_id', v_run.run_id, 'thread_id', v_run.thread_id,
                                 'request_id', v_run.request_id, 'run_type', v_run.run_type,
                                 'message_id', v_run.input_message_id, 'query', m.content,
                                 'input', v_run.input_payload)::text,
               v_run.status, v_run.last_event_seq
        FROM (SELECT 1) one
        LEFT JOIN yuxi.messages m ON m.id = v_run.input_message_id;
    END IF;
    RETURN QUERY SELECT * FROM yuxi.run_stream_read(p_run_id, p_after, p_limit);
END;
$$;
COMMENT ON FUNCTION yuxi.run_stream_open(uuid, uuid, bigint, integer, boolean) IS
    'The first read of a run''s SSE stream: its init row (seq 0, with p_init), then yuxi.run_stream_read''s rows, in one snapshot. Raises not_found (YN001)';

-- The write-once rule has one definition: run_write_manifest is run_commit_manifest
-- without events.
CREATE OR REPLACE FUNCTION yuxi.run_write_manifest(
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
