-- The run path over HTTP, made cheaper (tests/bench/http_runs.py).

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
    visible_subagents    text[]
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
           i.input_text, i.identity_error, i.visible_subagents
    FROM yuxi.run_execution_input(p_run_id) i;
END;
$$;
COMMENT ON FUNCTION yuxi.run_claim_execution(uuid, text, double precision, timestamptz) IS
    'Worker: yuxi.run_claim and yuxi.run_execution_input in one call, committed without waiting for the WAL flush (the manifest''s synchronous commit makes it durable). Raises as yuxi.run_claim';

-- A read of a run's SSE stream: the run's events after a seq, each with the run's
-- status; with no event after it, one row without an event. One snapshot, so a run
-- seen ended has every event it will ever have (its end included) in the same read.
-- No row: no such run. Payloads come as JSON text, sent to the client as they are.
CREATE FUNCTION yuxi.run_stream_read(p_run_id uuid, p_after bigint, p_limit integer DEFAULT 1000)
RETURNS TABLE (seq bigint, event text, payload text, run_status text, last_event_seq bigint)
LANGUAGE sql STABLE AS $$
    SELECT e.seq, e.event, e.payload::text, r.status, r.last_event_seq
    FROM yuxi.agent_runs r
    LEFT JOIN LATERAL (
        SELECT ev.seq, ev.event, ev.payload FROM yuxi.run_events ev
        WHERE ev.run_id = r.run_id AND ev.seq > p_after
        ORDER BY ev.seq
        LIMIT p_limit
    ) e ON true
    WHERE r.run_id = p_run_id
    ORDER BY e.seq
$$;
COMMENT ON FUNCTION yuxi.run_stream_read(uuid, bigint, integer) IS
    'A read of a run''s SSE stream: its events after a seq with the run''s status on each, or one row without an event; no row for no such run';
