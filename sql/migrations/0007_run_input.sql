-- yuxi.run_input: a run's stream starts with an init event echoing the stored input.

-- What a run was asked, as stored: the `init` event a run's stream starts with (the
-- client shows the saved input before anything streams). The user's message of a chat
-- run, and the run's input (model_spec, tool_approval_mode; resume: the answer; subagent:
-- the task).
CREATE FUNCTION yuxi.run_input(p_run_id uuid, p_uid uuid DEFAULT NULL)
RETURNS TABLE (run_id uuid, thread_id uuid, request_id text, run_type text,
               message_id bigint, query text, input jsonb)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_run yuxi.agent_runs;
BEGIN
    v_run := yuxi.run_get(p_run_id, p_uid);
    RETURN QUERY
    SELECT v_run.run_id, v_run.thread_id, v_run.request_id, v_run.run_type,
           v_run.input_message_id, m.content, v_run.input_payload
    FROM (SELECT 1) one
    LEFT JOIN yuxi.messages m ON m.id = v_run.input_message_id;
END;
$$;
COMMENT ON FUNCTION yuxi.run_input(uuid, uuid) IS
    'What a run was asked, as stored: its user message (message_id, query) and input payload, for the init event of its stream. Raises not_found (YN001)';
