-- yuxi.run_check_lease: the memory tools check that their run still holds its lease
-- (and belongs to the user whose agents/MEMORY.md they touch) before every call.

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
