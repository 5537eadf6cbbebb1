-- Stateless LangGraph runs: a thread of their own, deleted once its runs have ended.

ALTER TABLE yuxi.lg_threads
    ADD COLUMN temporary boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN yuxi.lg_threads.temporary IS
    'A stateless run''s thread (on_completion delete): deleted once its runs have ended';
CREATE INDEX lg_threads_temporary_idx ON yuxi.lg_threads (updated_at) WHERE temporary AND NOT deleted;

CREATE FUNCTION yuxi.lg_thread_set_temporary(p_uid uuid, p_thread_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE yuxi.lg_threads SET temporary = true, updated_at = clock_timestamp()
    WHERE thread_id = p_thread_id AND uid = p_uid AND NOT deleted;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'thread % not found', p_thread_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.lg_thread_set_temporary(uuid, uuid) IS
    'LangGraph API: marks the caller''s thread as a stateless run''s, deleted once its runs have ended. Raises not_found (YN001)';

-- Deletes temporary threads whose runs have all ended (none active, no request queued),
-- oldest first, each under its conversation's lock (yuxi.thread_delete); how many.
CREATE FUNCTION yuxi.lg_temporary_sweep(p_limit integer DEFAULT 100) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_thread yuxi.lg_threads;
    v_count integer := 0;
BEGIN
    FOR v_thread IN
        SELECT t.* FROM yuxi.lg_threads t
        WHERE t.temporary AND NOT t.deleted
          AND NOT EXISTS (SELECT 1 FROM yuxi.agent_run_requests r
                          WHERE r.thread_id = t.thread_id AND r.status = 'queued')
          AND NOT EXISTS (SELECT 1 FROM yuxi.agent_runs ar
                          WHERE ar.thread_id = t.thread_id AND yuxi.run_is_active(ar.status))
        ORDER BY t.updated_at
        LIMIT p_limit
        FOR UPDATE OF t SKIP LOCKED  -- two sweeps never delete one thread twice
    LOOP
        PERFORM yuxi.lg_thread_delete(v_thread.uid, v_thread.thread_id);
        v_count := v_count + 1;
    END LOOP;
    RETURN v_count;
END;
$$;
COMMENT ON FUNCTION yuxi.lg_temporary_sweep(integer) IS
    'Maintenance: deletes the threads of stateless runs whose runs have all ended; how many';
