-- yuxi: agents, who may see them, and saving them.

-- plpgsql rather than SQL: its plan is cached, which before PostgreSQL 18 halves the
-- cost of every call (it is on the path of every submit and every run).
CREATE FUNCTION yuxi.agent_visible_to(p_slug text, p_uid uuid) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1
        FROM yuxi.agents a
        JOIN yuxi.users u ON u.id = p_uid AND u.deleted_at IS NULL
        WHERE a.slug = p_slug
          AND a.deleted_at IS NULL
          AND (a.share_scope = 'all'
               OR u.is_admin
               OR (a.share_scope = 'selected'
                   AND EXISTS (SELECT 1 FROM yuxi.agent_shares s
                               WHERE s.agent_slug = a.slug AND s.uid = p_uid)))
    );
END;
$$;
COMMENT ON FUNCTION yuxi.agent_visible_to(text, uuid) IS
    'True when the live user p_uid may see the live agent p_slug (share scope all, an admin, or shared with the user)';

-- Subagents a user can see (the default `subagents` of a chatbot).
CREATE FUNCTION yuxi.subagents_visible_to(p_uid uuid) RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    SELECT a.slug FROM yuxi.agents a
    WHERE a.is_subagent AND yuxi.agent_visible_to(a.slug, p_uid)
    ORDER BY a.slug
$$;
COMMENT ON FUNCTION yuxi.subagents_visible_to(uuid) IS
    'The slugs of the subagents a user can see, in order';

-- Agents a user can see.
CREATE FUNCTION yuxi.agents_visible(p_uid uuid)
RETURNS TABLE (slug text, name text, description text, backend_id text, config_json jsonb,
               share_scope text, is_subagent boolean, updated_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT a.slug, a.name, a.description, a.backend_id, a.config_json, a.share_scope,
           a.is_subagent, a.updated_at
    FROM yuxi.agents a
    WHERE a.deleted_at IS NULL AND yuxi.agent_visible_to(a.slug, p_uid)
    ORDER BY a.slug
$$;
COMMENT ON FUNCTION yuxi.agents_visible(uuid) IS
    'The agents a user can see, by slug';

-- Creates an agent unless one with this slug exists; true when it was created.
CREATE FUNCTION yuxi.agent_seed(
    p_slug text, p_name text, p_backend_id text, p_config jsonb DEFAULT '{"context": {}}',
    p_description text DEFAULT ''
) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_created boolean;
BEGIN
    INSERT INTO yuxi.agents (slug, name, backend_id, config_json, description)
    VALUES (p_slug, p_name, p_backend_id, coalesce(p_config, '{"context": {}}'), coalesce(p_description, ''))
    ON CONFLICT (slug) DO NOTHING
    RETURNING true INTO v_created;
    RETURN coalesce(v_created, false);
END;
$$;
COMMENT ON FUNCTION yuxi.agent_seed(text, text, text, jsonb, text) IS
    'Creates an agent unless one with this slug exists; true when it was created';

-- Creates (p_create) or updates an agent, with the users it is shared with when
-- share_scope is 'selected'. Admin-only at the API; open to operators from psql.
CREATE FUNCTION yuxi.agent_save(
    p_create boolean, p_slug text, p_name text, p_description text, p_backend_id text,
    p_config jsonb, p_share_scope text, p_shared_with uuid[], p_is_subagent boolean,
    p_max_run_attempts integer, p_metadata jsonb DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_slug IS NULL OR p_slug !~ '^[a-z0-9][a-z0-9_-]{0,62}$' THEN
        RAISE EXCEPTION 'an agent id is 1-63 characters of a-z, 0-9, _ and - (starting with a letter or digit)'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_name IS NULL OR p_name ~ '^[[:space:]]*$' OR length(p_name) > 200 THEN
        RAISE EXCEPTION 'an agent name is 1-200 characters' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_config IS NULL OR jsonb_typeof(p_config) <> 'object'
       OR jsonb_typeof(coalesce(p_config -> 'context', '{}')) <> 'object' THEN
        RAISE EXCEPTION 'config must be an object like {"context": {...}}'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_max_run_attempts IS NULL OR p_max_run_attempts NOT BETWEEN 1 AND 10 THEN
        RAISE EXCEPTION 'max_run_attempts must be between 1 and 10'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF jsonb_typeof(coalesce(p_metadata, '{}')) <> 'object' THEN
        RAISE EXCEPTION 'metadata must be an object' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_create THEN
        INSERT INTO yuxi.agents (slug, name, description, backend_id, config_json, share_scope,
                                 is_subagent, max_run_attempts, metadata)
        VALUES (p_slug, p_name, coalesce(p_description, ''), p_backend_id, p_config, p_share_scope,
                coalesce(p_is_subagent, false), p_max_run_attempts, coalesce(p_metadata, '{}'))
        ON CONFLICT (slug) DO NOTHING;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'agent % already exists', p_slug USING ERRCODE = 'YQ011', HINT = 'agent_exists';
        END IF;
    ELSE
        UPDATE yuxi.agents
        SET name = p_name, description = coalesce(p_description, ''), backend_id = p_backend_id,
            config_json = p_config, share_scope = p_share_scope,
            is_subagent = coalesce(p_is_subagent, false), max_run_attempts = p_max_run_attempts,
            metadata = coalesce(p_metadata, metadata), updated_at = now()
        WHERE slug = p_slug AND deleted_at IS NULL;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'agent % not found', p_slug USING ERRCODE = 'YN001', HINT = 'not_found';
        END IF;
        DELETE FROM yuxi.agent_shares WHERE agent_slug = p_slug;
    END IF;
    INSERT INTO yuxi.agent_shares (agent_slug, uid)
    SELECT p_slug, u.id FROM yuxi.users u
    WHERE u.id = ANY (coalesce(p_shared_with, '{}')) AND u.deleted_at IS NULL
    ON CONFLICT DO NOTHING;
END;
$$;
COMMENT ON FUNCTION yuxi.agent_save(boolean, text, text, text, text, jsonb, text, uuid[], boolean, integer, jsonb) IS
    'Creates (p_create) or updates an agent and the users it is shared with; p_metadata NULL keeps it (empty on create). Raises invalid_input (YV001), agent_exists (YQ011), not_found (YN001)';

-- Replaces only an agent's configuration (what the console's configuration form saves),
-- leaving its name, sharing and retry budget as they are; one UPDATE, so a concurrent
-- yuxi.agent_save of the other settings is never undone by it.
CREATE FUNCTION yuxi.agent_set_config(p_slug text, p_config jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_config IS NULL OR jsonb_typeof(p_config) <> 'object'
       OR jsonb_typeof(coalesce(p_config -> 'context', '{}')) <> 'object' THEN
        RAISE EXCEPTION 'config must be an object like {"context": {...}}'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    UPDATE yuxi.agents SET config_json = p_config, updated_at = now()
    WHERE slug = p_slug AND deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'agent % not found', p_slug USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.agent_set_config(text, jsonb) IS
    'Replaces a live agent''s config_json and nothing else. Raises invalid_input (YV001), not_found (YN001)';

-- Changes the given settings of a live agent and keeps the others (NULL: unchanged):
-- p_context replaces config_json.context, p_metadata is merged into its metadata. One
-- UPDATE, so concurrent changes of other settings are never undone by it.
CREATE FUNCTION yuxi.agent_update(
    p_slug text, p_name text DEFAULT NULL, p_description text DEFAULT NULL,
    p_backend_id text DEFAULT NULL, p_context jsonb DEFAULT NULL, p_metadata jsonb DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_name IS NOT NULL AND (p_name ~ '^[[:space:]]*$' OR length(p_name) > 200) THEN
        RAISE EXCEPTION 'an agent name is 1-200 characters' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_context IS NOT NULL AND jsonb_typeof(p_context) <> 'object' THEN
        RAISE EXCEPTION 'context must be an object' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_metadata IS NOT NULL AND jsonb_typeof(p_metadata) <> 'object' THEN
        RAISE EXCEPTION 'metadata must be an object' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    UPDATE yuxi.agents
    SET name = coalesce(p_name, name), description = coalesce(p_description, description),
        backend_id = coalesce(p_backend_id, backend_id),
        config_json = CASE WHEN p_context IS NULL THEN config_json
                           ELSE jsonb_set(config_json, '{context}', p_context) END,
        metadata = metadata || coalesce(p_metadata, '{}'), updated_at = now()
    WHERE slug = p_slug AND deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'agent % not found', p_slug USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.agent_update(text, text, text, text, jsonb, jsonb) IS
    'Changes the given settings of a live agent (NULL keeps one): name, description, backend, config_json.context (replaced), metadata (merged); a new version. Raises invalid_input (YV001), not_found (YN001)';

-- Soft-deletes a live agent: nobody sees it any more, its runs fail, its slug stays taken.
CREATE FUNCTION yuxi.agent_delete(p_slug text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE yuxi.agents SET deleted_at = now(), updated_at = now()
    WHERE slug = p_slug AND deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'agent % not found', p_slug USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.agent_delete(text) IS
    'Soft-deletes a live agent (its slug stays taken). Raises not_found (YN001)';

-- Makes an earlier (or later) version the agent's current one: its name, description,
-- backend, configuration and metadata come back as they were; no version is added.
CREATE FUNCTION yuxi.agent_set_version(p_slug text, p_version integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v yuxi.agent_versions;
BEGIN
    SELECT * INTO v FROM yuxi.agent_versions WHERE agent_slug = p_slug AND version = p_version;
    IF NOT FOUND OR NOT EXISTS (SELECT 1 FROM yuxi.agents WHERE slug = p_slug AND deleted_at IS NULL) THEN
        RAISE EXCEPTION 'agent % has no version %', p_slug, p_version
            USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    UPDATE yuxi.agents
    SET version = v.version, name = v.name, description = v.description,
        backend_id = v.backend_id, config_json = v.config_json, metadata = v.metadata,
        updated_at = now()
    WHERE slug = p_slug AND deleted_at IS NULL;
END;
$$;
COMMENT ON FUNCTION yuxi.agent_set_version(text, integer) IS
    'Makes version p_version the live agent''s current one (its settings as they were then; no new version). Raises not_found (YN001)';

-- The versions of an agent p_uid may see, newest first.
CREATE FUNCTION yuxi.agent_version_list(p_uid uuid, p_slug text)
RETURNS TABLE (version integer, name text, description text, backend_id text,
               config_json jsonb, metadata jsonb, created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT v.version, v.name, v.description, v.backend_id, v.config_json, v.metadata, v.created_at
    FROM yuxi.agent_versions v
    WHERE v.agent_slug = p_slug AND yuxi.agent_visible_to(p_slug, p_uid)
    ORDER BY v.version DESC
$$;
COMMENT ON FUNCTION yuxi.agent_version_list(uuid, text) IS
    'The versions of an agent the user may see, newest first; none for an agent they cannot see';

-- A change of an agent's name, description, backend, configuration or metadata is a new
-- version (one more than the newest, under the agent's row lock); a change of
-- agents.version itself moves to a version that exists (yuxi.agent_set_version).
CREATE FUNCTION yuxi.agent_version_next() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.version IS DISTINCT FROM OLD.version THEN
        IF NOT EXISTS (SELECT 1 FROM yuxi.agent_versions
                       WHERE agent_slug = NEW.slug AND version = NEW.version) THEN
            RAISE EXCEPTION 'agent % has no version %', NEW.slug, NEW.version
                USING ERRCODE = 'YN001', HINT = 'not_found';
        END IF;
    ELSIF (NEW.name, NEW.description, NEW.backend_id, NEW.config_json, NEW.metadata)
          IS DISTINCT FROM (OLD.name, OLD.description, OLD.backend_id, OLD.config_json, OLD.metadata) THEN
        NEW.version := coalesce((SELECT max(version) FROM yuxi.agent_versions
                                 WHERE agent_slug = NEW.slug), OLD.version) + 1;
    END IF;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION yuxi.agent_version_next() IS
    'Trigger: a changed agent gets the next version number; a moved version must exist';

CREATE TRIGGER agent_version_next BEFORE UPDATE ON yuxi.agents
    FOR EACH ROW EXECUTE FUNCTION yuxi.agent_version_next();

CREATE FUNCTION yuxi.agent_version_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO yuxi.agent_versions (agent_slug, version, name, description, backend_id,
                                     config_json, metadata)
    VALUES (NEW.slug, NEW.version, NEW.name, NEW.description, NEW.backend_id,
            NEW.config_json, NEW.metadata)
    ON CONFLICT (agent_slug, version) DO NOTHING;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION yuxi.agent_version_record() IS
    'Trigger: records a new agent, or an agent''s new version, in yuxi.agent_versions';

CREATE TRIGGER agent_version_created AFTER INSERT ON yuxi.agents
    FOR EACH ROW EXECUTE FUNCTION yuxi.agent_version_record();
CREATE TRIGGER agent_version_changed AFTER UPDATE ON yuxi.agents
    FOR EACH ROW WHEN (OLD.version IS DISTINCT FROM NEW.version)
    EXECUTE FUNCTION yuxi.agent_version_record();

-- Every agent, deleted ones included (a deleted slug still cannot be created again).
-- shared_with lists the live users of a `selected` agent's shares: deleted users no
-- longer see anything (agent_visible_to), so listing them would mislead.
CREATE FUNCTION yuxi.agent_list()
RETURNS TABLE (slug text, name text, description text, backend_id text, config_json jsonb,
               share_scope text, shared_with uuid[], shared_with_names text[],
               is_subagent boolean, max_run_attempts integer, created_at timestamptz,
               updated_at timestamptz, deleted_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT a.slug, a.name, a.description, a.backend_id, a.config_json, a.share_scope,
           coalesce(s.ids, '{}'), coalesce(s.names, '{}'),
           a.is_subagent, a.max_run_attempts, a.created_at, a.updated_at, a.deleted_at
    FROM yuxi.agents a
    LEFT JOIN LATERAL (
        SELECT array_agg(u.id ORDER BY u.name, u.id) AS ids,
               array_agg(u.name ORDER BY u.name, u.id) AS names
        FROM yuxi.agent_shares sh
        JOIN yuxi.users u ON u.id = sh.uid AND u.deleted_at IS NULL
        WHERE sh.agent_slug = a.slug
    ) s ON true
    ORDER BY a.slug
$$;
COMMENT ON FUNCTION yuxi.agent_list() IS
    'Operators: every agent, deleted ones included, with the live users it is shared with';

-- The model registry's table is in 02_tables.sql, its other functions in 18_models.sql;
-- this one is here because yuxi.run_execution_input (08_runs.sql) reads it.
-- The model a run of p_uid uses for p_spec: the user's own model of that spec when it
-- is enabled, else the enabled platform model; with the sealed key (for the worker
-- only). No row when neither exists; a disabled match is returned with enabled false
-- so that the caller can say so.
CREATE FUNCTION yuxi.model_for_user(p_uid uuid, p_spec text) RETURNS SETOF yuxi.models
LANGUAGE sql STABLE AS $$
    SELECT m.* FROM yuxi.models m
    WHERE m.spec = p_spec AND (m.owner_uid = p_uid OR m.owner_uid IS NULL)
    ORDER BY m.enabled DESC, (m.owner_uid IS NULL)
    LIMIT 1
$$;
COMMENT ON FUNCTION yuxi.model_for_user(uuid, text) IS
    'Worker and intake: the registry row a spec names for a user (their own enabled one first, then the platform''s), with its sealed key; disabled only when nothing enabled matches';
