-- A run's claim carries the resources its user may use (yuxi.run_catalog: readable
-- knowledge bases, usable shared skills, usable MCP servers without their secrets), so
-- preparation reads the database once instead of once per kind.

-- The resources a user may use, as a run's preparation reads them (the catalog of
-- yuxi/runtime/resources.py): {knowledge_bases: [{id, name, slug}], skills: [rows of
-- yuxi.skills_usable], mcp_servers: [{id, slug, name, transport, version}]}. PL/pgSQL, so that this file may name what later files define.
CREATE FUNCTION yuxi.run_catalog(p_uid uuid) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN jsonb_build_object(
        'knowledge_bases', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                               'id', k.id, 'name', k.name, 'slug', k.slug)
                                           ORDER BY k.id), '[]')
                            FROM yuxi.knowledge_bases k WHERE yuxi.kb_may_read(k, p_uid)),
        'skills', (SELECT coalesce(jsonb_agg(to_jsonb(s) ORDER BY s.slug), '[]')
                   FROM yuxi.skills_usable(p_uid) s),
        -- never their secrets: the worker reads those again where it connects
        'mcp_servers', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                          'id', m.id, 'slug', m.slug, 'name', m.name,
                                          'transport', m.transport, 'version', m.updated_at)
                                      ORDER BY m.slug), '[]')
                        FROM yuxi.mcp_server_connections(p_uid) m));
END;
$$;
COMMENT ON FUNCTION yuxi.run_catalog(uuid) IS
    'Internal (yuxi.run_execution_input): the knowledge bases, shared skills and MCP servers (without secrets) a user may use, as a run''s preparation reads them';

DROP FUNCTION yuxi.run_claim_execution(uuid, text, double precision, timestamptz);
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
    visible_subagents  text[],
    attachments        jsonb,
    model              jsonb,
    model_key_sealed   bytea,
    input_attachments  jsonb,
    catalog            jsonb
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
           ARRAY(SELECT s FROM yuxi.subagents_visible_to(r.uid) s),
           yuxi.thread_attachments_json(r.thread_id),
           to_jsonb(mo) - 'api_key_sealed' - 'api_key_hint', mo.api_key_sealed,
           m.metadata -> 'attachments', yuxi.run_catalog(r.uid)
    FROM yuxi.agent_runs r
    LEFT JOIN yuxi.conversations c ON c.thread_id = r.thread_id
    LEFT JOIN yuxi.agents a ON a.slug = r.agent_slug AND a.deleted_at IS NULL
    LEFT JOIN yuxi.projects p ON p.id = c.project_id
    LEFT JOIN yuxi.messages m ON m.id = r.input_message_id
    LEFT JOIN LATERAL yuxi.model_for_user(r.uid, r.input_payload->>'model_spec') mo ON true
    WHERE r.run_id = p_run_id
$$;
COMMENT ON FUNCTION yuxi.run_execution_input(uuid) IS
    'Worker: everything needed to execute a run, in one read; identity_error says why the run may not execute (NULL when it may); attachments are the thread''s files under uploads/; model is the registry row of the run''s model_spec (without its key; NULL when it has none) and model_key_sealed its sealed key; input_attachments the ids of the attachments its input message refers to; catalog the resources its user may use (yuxi.run_catalog)';

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
    visible_subagents    text[],
    attachments          jsonb,
    model                jsonb,
    model_key_sealed     bytea,
    input_attachments    jsonb,
    catalog              jsonb,
    credit_hold          numeric,
    credit_error         text
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
           i.input_text, i.identity_error, i.visible_subagents, i.attachments, i.model,
           i.model_key_sealed, i.input_attachments, i.catalog, f.hold, f.error
    FROM yuxi.run_execution_input(p_run_id) i
    CROSS JOIN LATERAL yuxi.credit_freeze(p_run_id, v_claim.uid, i.model) f;
END;
$$;
COMMENT ON FUNCTION yuxi.run_claim_execution(uuid, text, double precision, timestamptz) IS
    'Worker: yuxi.run_claim and yuxi.run_execution_input in one call, with the run''s credit freeze (yuxi.credit_freeze: credit_hold, or credit_error when the balance cannot cover it), committed without waiting for the WAL flush (the manifest''s synchronous commit makes it durable). Raises as yuxi.run_claim';
