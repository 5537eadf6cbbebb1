-- The web console (issue 15): single-use login codes for its login links, and
-- saving an agent's configuration alone.

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

-- A login link is the console's address with a random code in its fragment
-- (`/#login=<code>`): the fragment never reaches a server log or a Referer. Only the
-- code's sha256 is stored. The console sends the code once to POST /api/console/login,
-- which redeems it: in one transaction the code is marked used and a new API token is
-- created for its user (only that token's sha256 is stored too); the token goes back to
-- the browser, which keeps it in sessionStorage. A code works once and only until it
-- expires; a used or expired code is refused like an unknown one.

CREATE TABLE yuxi.login_codes (
    code_hash   bytea PRIMARY KEY CHECK (length(code_hash) = 32),
    uid         uuid NOT NULL REFERENCES yuxi.users (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz,
    token_id    uuid REFERENCES yuxi.api_tokens (id) ON DELETE SET NULL,
    CHECK (expires_at > created_at),
    CHECK (token_id IS NULL OR used_at IS NOT NULL)
);
COMMENT ON TABLE yuxi.login_codes IS
    'Single-use console login codes (sha256 only), each redeemed at most once for a new API token before it expires';
COMMENT ON COLUMN yuxi.login_codes.token_id IS 'The API token the code was exchanged for';

-- Stores a new code (p_code_hash = sha256 of the code) for the live user p_uid, valid
-- until p_expires_at; codes that expired a day before p_now are removed on the way.
CREATE FUNCTION yuxi.login_code_create(
    p_uid uuid, p_code_hash bytea, p_expires_at timestamptz, p_now timestamptz DEFAULT now()
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_code_hash IS NULL OR length(p_code_hash) <> 32 THEN
        RAISE EXCEPTION 'a login code is stored as its 32-byte sha256'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_expires_at IS NULL OR p_expires_at <= p_now THEN
        RAISE EXCEPTION 'a login code must expire in the future' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM yuxi.users WHERE id = p_uid AND deleted_at IS NULL) THEN
        RAISE EXCEPTION 'user % not found', p_uid USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    DELETE FROM yuxi.login_codes WHERE expires_at < p_now - interval '1 day';
    INSERT INTO yuxi.login_codes (uid, code_hash, created_at, expires_at)
    VALUES (p_uid, p_code_hash, least(clock_timestamp(), p_now), p_expires_at);
END;
$$;
COMMENT ON FUNCTION yuxi.login_code_create(uuid, bytea, timestamptz, timestamptz) IS
    'Stores a single-use console login code (p_code_hash = sha256 of the code) for a live user until p_expires_at. Raises invalid_input (YV001), not_found (YN001)';

-- Redeems a code: marks it used and creates an API token (p_token_hash = sha256 of the
-- new token) for its user, in one transaction; returns the user id, or NULL when the
-- code is unknown, already used, expired, or its user was deleted (all alike, so the
-- answer tells a guesser nothing). The guarded UPDATE makes two concurrent redemptions
-- of one code end with one token.
CREATE FUNCTION yuxi.login_code_redeem(
    p_code_hash bytea, p_token_hash bytea, p_token_name text DEFAULT 'console login',
    p_now timestamptz DEFAULT now()
) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_uid uuid;
BEGIN
    UPDATE yuxi.login_codes c SET used_at = p_now
    WHERE c.code_hash = p_code_hash AND c.used_at IS NULL AND c.expires_at > p_now
      AND EXISTS (SELECT 1 FROM yuxi.users u WHERE u.id = c.uid AND u.deleted_at IS NULL)
    RETURNING c.uid INTO v_uid;
    IF v_uid IS NULL THEN
        RETURN NULL;
    END IF;
    UPDATE yuxi.login_codes SET token_id = yuxi.token_create(v_uid, p_token_hash, p_token_name)
    WHERE code_hash = p_code_hash;
    RETURN v_uid;
END;
$$;
COMMENT ON FUNCTION yuxi.login_code_redeem(bytea, bytea, text, timestamptz) IS
    'Marks a console login code used and creates an API token (p_token_hash) for its user; returns the user id, or NULL for an unknown, used or expired code or a deleted user';
