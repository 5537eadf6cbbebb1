-- yuxi: run events (the durable log SSE replays) and the notifications that wake the
-- streams following a run or a request.

-- ---------------------------------------------------------------------------------
-- Run events

-- Appends events ([{event, payload}, ...]) with gap-free seqs as the lease holder; returns
-- the last seq. `end` is written only when the run finishes, so there is exactly one.
-- p_batch numbers the attempt's batches (1, 2, ...; each claim starts again): a batch
-- whose number is not above the last one stored is already there and is skipped, so a
-- worker that lost the reply to a committed append re-sends it without storing it
-- twice. NULL appends without that check (yuxi.run_append_events).
-- p_notify => false: the caller sends the yuxi_run_events NOTIFY itself right after
-- commit. PostgreSQL serialises the commits of all transactions that NOTIFY, disk flush
-- included, so the hot paths of a worker notify from a transaction of their own.
CREATE FUNCTION yuxi.run_append_batch(
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
CREATE FUNCTION yuxi.run_append_events(
    p_run_id uuid, p_token uuid, p_events jsonb, p_now timestamptz DEFAULT NULL,
    p_notify boolean DEFAULT true
) RETURNS bigint
LANGUAGE sql AS $$
    SELECT yuxi.run_append_batch(p_run_id, p_token, NULL, p_events, p_now, p_notify)
$$;
COMMENT ON FUNCTION yuxi.run_append_events(uuid, uuid, jsonb, timestamptz, boolean) IS
    'Appends events [{event, payload}] with gap-free seqs as the lease holder (yuxi.run_append_batch without a batch number: a re-send is stored again); returns the last seq. Raises invalid_input (YV001), lease_lost (YL001)';

-- Announces a run's events up to p_last, after their commit: NOTIFY yuxi_run_events
-- "<run_id> <p_last>", followed by as many of the events from p_first to p_last as fit
-- in 7,900 bytes (at most 64, the newest kept when not all fit), one per line:
-- "\n<seq>\t<event>\t<payload as JSON text>", exactly as yuxi.run_stream_read returns
-- them (JSON text never holds a raw tab or newline). A stream that has sent every event
-- before the first one carried sends them without reading; any other reads as for a
-- bare notification. p_first NULL (or above p_last): the bare "<run_id> <p_last>".
CREATE FUNCTION yuxi.run_events_announce(p_run_id uuid, p_last bigint, p_first bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_head text := p_run_id::text || ' ' || p_last::text;
    v_lines text;
BEGIN
    IF p_first IS NOT NULL AND p_first <= p_last THEN
        SELECT string_agg(E'\n' || ev.seq::text || E'\t' || ev.event || E'\t' || ev.payload::text, '' ORDER BY ev.seq)
        INTO v_lines
        FROM yuxi.run_events ev
        WHERE ev.run_id = p_run_id AND ev.seq >= greatest(p_first, p_last - 63) AND ev.seq <= p_last;
        IF octet_length(v_lines) > 7900 - octet_length(v_head) THEN
            SELECT string_agg(l.line, '' ORDER BY l.seq) INTO v_lines
            FROM (SELECT e.seq, e.line, sum(octet_length(e.line)) OVER (ORDER BY e.seq DESC) AS size
                  FROM (SELECT ev.seq, E'\n' || ev.seq::text || E'\t' || ev.event || E'\t' || ev.payload::text AS line
                        FROM yuxi.run_events ev
                        WHERE ev.run_id = p_run_id AND ev.seq >= greatest(p_first, p_last - 63)
                          AND ev.seq <= p_last) e) l
            WHERE l.size <= 7900 - octet_length(v_head);
        END IF;
    END IF;
    PERFORM pg_notify('yuxi_run_events', v_head || coalesce(v_lines, ''));
END;
$$;
COMMENT ON FUNCTION yuxi.run_events_announce(uuid, bigint, bigint) IS
    'Worker: the yuxi_run_events NOTIFY sent after a commit, "<run_id> <p_last>" followed by the events from p_first on that fit ("\n<seq>\t<event>\t<payload>" each), so streams need not read them';

-- Events of a run after a seq, for SSE replay.
CREATE FUNCTION yuxi.run_events_after(p_run_id uuid, p_after bigint, p_limit integer DEFAULT 1000)
RETURNS TABLE (seq bigint, event text, payload jsonb, created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT e.seq, e.event, e.payload, e.created_at FROM yuxi.run_events e
    WHERE e.run_id = p_run_id AND e.seq > p_after
    ORDER BY e.seq
    LIMIT p_limit
$$;
COMMENT ON FUNCTION yuxi.run_events_after(uuid, bigint, integer) IS
    'A run''s events after a seq, for SSE replay';

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

-- The run's stored `end` event (none while the run is not over).
CREATE FUNCTION yuxi.run_end_event(p_run_id uuid)
RETURNS TABLE (seq bigint, event text, payload jsonb, created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT e.seq, e.event, e.payload, e.created_at FROM yuxi.run_events e
    WHERE e.run_id = p_run_id AND e.event = 'end'
$$;
COMMENT ON FUNCTION yuxi.run_end_event(uuid) IS
    'A run''s end event (no row while the run is not over)';

-- ---------------------------------------------------------------------------------
-- Request followers
--
-- GET /api/agent/requests/{id}/events follows a request through its thread's queue. Most
-- changes reach it through the thread's latest run: a run's end is committed together
-- with the dispatch of the next request, and run_finish notifies yuxi_run_events. The
-- others notify yuxi_request_events with the thread id, from these triggers, so that a
-- change made from psql is heard as promptly as one made through the API:
--
--   a queued request cancelled (alone, or with its deleted thread);
--   a queued request steered, or submitted as a steer while the thread is busy;
--   a paused backlog resumed (thread_continue, or the last queued request cancelled);
--   an interrupted run resumed (the thread's latest run is then the new resume run).
--
-- All of these are rare. A plain submit, a dispatch and a finish fire none of them: the
-- WHEN conditions are false there, so the hot paths send no NOTIFY from here (a NOTIFY
-- serialises its transaction's commit with every other notifying commit of the cluster).

CREATE FUNCTION yuxi.notify_request_followers() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- identical notifications of one transaction are delivered once
    PERFORM pg_notify('yuxi_request_events', NEW.thread_id::text);
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION yuxi.notify_request_followers() IS
    'Trigger: notifies yuxi_request_events with the thread id';

CREATE TRIGGER agent_run_requests_cancelled_while_queued
    AFTER UPDATE OF status ON yuxi.agent_run_requests
    FOR EACH ROW WHEN (OLD.status = 'queued' AND NEW.status = 'cancelled')
    EXECUTE FUNCTION yuxi.notify_request_followers();

CREATE TRIGGER agent_run_requests_steered
    AFTER INSERT OR UPDATE OF queue_policy ON yuxi.agent_run_requests
    FOR EACH ROW WHEN (NEW.queue_policy = 'steer' AND NEW.status = 'queued')
    EXECUTE FUNCTION yuxi.notify_request_followers();

CREATE TRIGGER conversations_unpaused
    AFTER UPDATE OF paused_by_run_id ON yuxi.conversations
    FOR EACH ROW WHEN (OLD.paused_by_run_id IS NOT NULL AND NEW.paused_by_run_id IS NULL
                       AND NEW.status = 'active')
    EXECUTE FUNCTION yuxi.notify_request_followers();

CREATE TRIGGER agent_runs_resume_created
    AFTER INSERT ON yuxi.agent_runs
    FOR EACH ROW WHEN (NEW.run_type = 'resume')
    EXECUTE FUNCTION yuxi.notify_request_followers();
