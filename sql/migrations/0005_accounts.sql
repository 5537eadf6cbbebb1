-- yuxi: users, API tokens and agent seeding, callable from psql as from the CLI.
-- Tokens are never stored: callers pass sha256(token).

CREATE FUNCTION yuxi.user_create(
    p_name text, p_is_admin boolean, p_token_hash bytea, p_token_name text DEFAULT 'default'
) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_uid uuid;
BEGIN
    IF p_name IS NULL OR length(btrim(p_name)) = 0 OR length(p_name) > 200 THEN
        RAISE EXCEPTION 'a user name is 1-200 characters' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    INSERT INTO yuxi.users (name, is_admin) VALUES (p_name, coalesce(p_is_admin, false))
    ON CONFLICT (name) WHERE deleted_at IS NULL DO NOTHING
    RETURNING id INTO v_uid;
    IF v_uid IS NULL THEN
        RAISE EXCEPTION 'user % already exists', p_name USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    PERFORM yuxi.token_create(v_uid, p_token_hash, p_token_name);
    RETURN v_uid;
END;
$$;

CREATE FUNCTION yuxi.token_create(p_uid uuid, p_token_hash bytea, p_name text DEFAULT 'default')
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_id uuid;
BEGIN
    IF p_token_hash IS NULL OR length(p_token_hash) <> 32 THEN
        RAISE EXCEPTION 'a token is stored as its 32-byte sha256'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM yuxi.users WHERE id = p_uid AND deleted_at IS NULL) THEN
        RAISE EXCEPTION 'user % not found', p_uid USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    INSERT INTO yuxi.api_tokens (user_id, token_hash, name)
    VALUES (p_uid, p_token_hash, coalesce(p_name, 'default'))
    RETURNING id INTO v_id;
    RETURN v_id;
END;
$$;

-- The live user a token belongs to, or no row. last_used_at is refreshed at most once
-- a minute so authentication does not write on every request.
CREATE FUNCTION yuxi.token_authenticate(p_token_hash bytea)
RETURNS TABLE (uid uuid, name text, is_admin boolean)
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE yuxi.api_tokens t SET last_used_at = now()
    WHERE t.token_hash = p_token_hash AND t.revoked_at IS NULL
      AND (t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute');
    RETURN QUERY
    SELECT u.id, u.name, u.is_admin
    FROM yuxi.api_tokens t JOIN yuxi.users u ON u.id = t.user_id
    WHERE t.token_hash = p_token_hash AND t.revoked_at IS NULL AND u.deleted_at IS NULL;
END;
$$;

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
