-- yuxi: fewer round trips for a worker preparing a run.
--
-- run_execution_input also returns the subagents the run's user can see (what a
-- chatbot's unset or empty `subagents` resolves to), so preparing a Context reads the
-- database once; run_commit_manifest writes the manifest and re-reads the run's
-- identity in one call: the executor's last check before the graph starts.

DROP FUNCTION yuxi.run_execution_input(uuid);

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
    visible_subagents  text[]
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
           ARRAY(SELECT s FROM yuxi.subagents_visible_to(r.uid) s)
    FROM yuxi.agent_runs r
    LEFT JOIN yuxi.conversations c ON c.thread_id = r.thread_id
    LEFT JOIN yuxi.agents a ON a.slug = r.agent_slug AND a.deleted_at IS NULL
    LEFT JOIN yuxi.projects p ON p.id = c.project_id
    LEFT JOIN yuxi.messages m ON m.id = r.input_message_id
    WHERE r.run_id = p_run_id
$$;

-- Writes the manifest as yuxi.run_write_manifest does (under the lease, write-once) and
-- then reads the run's identity again, as it stands now that preparation is over: a
-- conversation deleted, an agent hidden or its backend changed meanwhile shows here.
CREATE FUNCTION yuxi.run_commit_manifest(
    p_run_id uuid, p_token uuid, p_manifest jsonb, p_fingerprint text
) RETURNS TABLE (fingerprint text, identity_error text, backend_id text)
LANGUAGE plpgsql AS $$
BEGIN
    fingerprint := yuxi.run_write_manifest(p_run_id, p_token, p_manifest, p_fingerprint);
    SELECT i.identity_error, i.backend_id INTO identity_error, backend_id
    FROM yuxi.run_execution_input(p_run_id) i;
    RETURN NEXT;
END;
$$;
