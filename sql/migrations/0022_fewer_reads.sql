-- Fewer reads on a run's path: a worker's NOTIFY after commit carries the events it
-- announces, so the SSE streams of an API process send them without reading them back
-- (yuxi.run_events_announce); a token is checked with one lookup (the write of
-- last_used_at only when it is due); a run's usage is summed by PL/pgSQL, whose plan is
-- kept (as a SQL function that could not be inlined, PostgreSQL before 18 planned it on
-- every call), and so are a thread's attachments read by the claim.

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

CREATE OR REPLACE FUNCTION yuxi.token_authenticate(p_token_hash bytea)
RETURNS TABLE (uid uuid, name text, is_admin boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_token uuid;
    v_used timestamptz;
BEGIN
    SELECT u.id, u.name, u.is_admin, t.id, t.last_used_at
    INTO uid, name, is_admin, v_token, v_used
    FROM yuxi.api_tokens t JOIN yuxi.users u ON u.id = t.user_id
    WHERE t.token_hash = p_token_hash AND t.revoked_at IS NULL AND u.deleted_at IS NULL;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF v_used IS NULL OR v_used < now() - interval '1 minute' THEN
        UPDATE yuxi.api_tokens t SET last_used_at = now()
        WHERE t.id = v_token AND (t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute');
    END IF;
    RETURN NEXT;
END;
$$;

CREATE OR REPLACE FUNCTION yuxi.usage_json(p_rows yuxi.run_usage[]) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF cardinality(p_rows) = 0 THEN
        RETURN NULL;
    END IF;
    RETURN (
        SELECT jsonb_build_object(
            'input_tokens', sum(m.input_tokens), 'output_tokens', sum(m.output_tokens),
            'cached_tokens', sum(m.cached_tokens), 'reasoning_tokens', sum(m.reasoning_tokens),
            'total_tokens', sum(m.input_tokens + m.output_tokens), 'cost', sum(m.cost),
            'by_model', jsonb_agg(jsonb_build_object(
                              'model', m.model, 'input_tokens', m.input_tokens,
                              'output_tokens', m.output_tokens, 'cached_tokens', m.cached_tokens,
                              'reasoning_tokens', m.reasoning_tokens,
                              'total_tokens', m.input_tokens + m.output_tokens,
                              'cost', m.cost, 'byok', m.byok) ORDER BY m.model))
        FROM (SELECT x.model, sum(x.input_tokens) AS input_tokens,
                     sum(x.output_tokens) AS output_tokens,
                     sum(x.cached_tokens) AS cached_tokens,
                     sum(x.reasoning_tokens) AS reasoning_tokens,
                     sum(x.cost) AS cost, bool_or(x.byok) AS byok
              FROM unnest(p_rows) x GROUP BY x.model) m);
END;
$$;
CREATE OR REPLACE FUNCTION yuxi.run_usage_json(p_run_id uuid) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN yuxi.usage_json(ARRAY(SELECT u FROM yuxi.run_usage u WHERE u.run_id = p_run_id));
END;
$$;

CREATE OR REPLACE FUNCTION yuxi.thread_attachments_json(p_thread_id uuid) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'id', a.id, 'filename', a.filename, 'path', 'uploads/' || a.filename,
                       'bytes', a.bytes, 'media_type', a.media_type) ORDER BY a.created_at, a.id), '[]')
            FROM yuxi.attachments a WHERE a.thread_id = p_thread_id);
END;
$$;
