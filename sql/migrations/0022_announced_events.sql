-- A worker's NOTIFY after commit carries the events it announces, so the SSE streams of
-- an API process send them without reading them back (yuxi.run_events_announce).

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
        SELECT string_agg(l.line, '' ORDER BY l.seq) INTO v_lines
        FROM (SELECT e.seq, e.line, sum(octet_length(e.line)) OVER (ORDER BY e.seq DESC) AS size
              FROM (SELECT ev.seq, E'\n' || ev.seq::text || E'\t' || ev.event || E'\t' || ev.payload::text AS line
                    FROM yuxi.run_events ev
                    WHERE ev.run_id = p_run_id AND ev.seq >= greatest(p_first, p_last - 63)
                      AND ev.seq <= p_last) e) l
        WHERE l.size <= 7900 - octet_length(v_head);
    END IF;
    PERFORM pg_notify('yuxi_run_events', v_head || coalesce(v_lines, ''));
END;
$$;
COMMENT ON FUNCTION yuxi.run_events_announce(uuid, bigint, bigint) IS
    'Worker: the yuxi_run_events NOTIFY sent after a commit, "<run_id> <p_last>" followed by the events from p_first on that fit ("\n<seq>\t<event>\t<payload>" each), so streams need not read them';
