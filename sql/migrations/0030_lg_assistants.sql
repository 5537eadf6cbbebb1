-- Assistants of the LangGraph API (docs/langgraph.md) as yuxi agents with a history:
-- an agent gains free metadata and a version; every change of its name, description,
-- backend, configuration or metadata is recorded as a new version in
-- yuxi.agent_versions (triggers, whoever changes it: /lg, /api, the CLI, psql), and an
-- earlier version can be made current again (yuxi.agent_set_version). yuxi.agent_save
-- takes the metadata; yuxi.agent_update changes some settings only, yuxi.agent_delete
-- soft-deletes. Existing agents start at version 1.

ALTER TABLE yuxi.agents
    ADD COLUMN version integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object');

-- Every version of an agent: what it was named, described, built from and configured
-- with. Written by the triggers on yuxi.agents only (04_agents.sql), whoever changes it.
CREATE TABLE yuxi.agent_versions (
    agent_slug   text NOT NULL REFERENCES yuxi.agents (slug) ON DELETE CASCADE,
    version      integer NOT NULL CHECK (version >= 1),
    name         text NOT NULL,
    description  text NOT NULL,
    backend_id   text NOT NULL,
    config_json  jsonb NOT NULL,
    metadata     jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (agent_slug, version)
);
COMMENT ON TABLE yuxi.agent_versions IS
    'The history of an agent: one row per version of its name, description, backend, config and metadata (written by triggers on yuxi.agents)';

INSERT INTO yuxi.agent_versions (agent_slug, version, name, description, backend_id, config_json,
                                 metadata, created_at)
SELECT slug, 1, name, description, backend_id, config_json, '{}', updated_at FROM yuxi.agents;

DROP FUNCTION yuxi.agent_save(boolean, text, text, text, text, jsonb, text, uuid[], boolean, integer);

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

-- The assistants of p_uid (or the one named p_slug): the live, non-subagent agents they
-- may see, with their version and metadata.
CREATE FUNCTION yuxi.lg_assistants(p_uid uuid, p_slug text DEFAULT NULL)
RETURNS TABLE (slug text, name text, description text, backend_id text, config_json jsonb,
               metadata jsonb, version integer, created_at timestamptz, updated_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT a.slug, a.name, a.description, a.backend_id, a.config_json, a.metadata, a.version,
           a.created_at, a.updated_at
    FROM yuxi.agents a
    WHERE a.deleted_at IS NULL AND NOT a.is_subagent AND (p_slug IS NULL OR a.slug = p_slug)
      AND yuxi.agent_visible_to(a.slug, p_uid)
    ORDER BY a.slug
$$;
COMMENT ON FUNCTION yuxi.lg_assistants(uuid, text) IS
    'LangGraph API: the assistants a user may see (live, non-subagent agents), or one of them, with version and metadata';
