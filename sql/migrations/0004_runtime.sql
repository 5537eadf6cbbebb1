-- yuxi: what a worker reads to execute a run.

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
    identity_error     text
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
           END
    FROM yuxi.agent_runs r
    LEFT JOIN yuxi.conversations c ON c.thread_id = r.thread_id
    LEFT JOIN yuxi.agents a ON a.slug = r.agent_slug AND a.deleted_at IS NULL
    LEFT JOIN yuxi.projects p ON p.id = c.project_id
    LEFT JOIN yuxi.messages m ON m.id = r.input_message_id
    WHERE r.run_id = p_run_id
$$;

-- Subagents a user can see (the default `subagents` of a chatbot).
CREATE FUNCTION yuxi.subagents_visible_to(p_uid uuid) RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    SELECT a.slug FROM yuxi.agents a
    WHERE a.is_subagent AND yuxi.agent_visible_to(a.slug, p_uid)
    ORDER BY a.slug
$$;
