-- yuxi: users and API tokens, callable from psql as from the CLI. Tokens are never
-- stored: callers pass sha256(token).

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
COMMENT ON FUNCTION yuxi.user_create(text, boolean, bytea, text) IS
    'Creates a user and its first API token (p_token_hash = sha256 of the token); returns the user id. Raises invalid_input (YV001) for a bad or taken name or hash';

-- The first admin of a fresh server (what `yuxi up` creates on first start): creates
-- user p_name as an admin with its first token while no live admin exists; returns the
-- new user's id, or NULL when there is already an admin. Concurrent first starts take
-- turns on a transaction-scoped advisory lock, so at most one admin is seeded.
CREATE FUNCTION yuxi.user_seed_admin(p_name text, p_token_hash bytea) RETURNS uuid
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('yuxi.user_seed_admin'));
    IF EXISTS (SELECT 1 FROM yuxi.users WHERE is_admin AND deleted_at IS NULL) THEN
        RETURN NULL;
    END IF;
    RETURN yuxi.user_create(p_name, true, p_token_hash);
END;
$$;
COMMENT ON FUNCTION yuxi.user_seed_admin(text, bytea) IS
    'Creates admin user p_name with its first token (p_token_hash = sha256 of the token) unless a live admin exists; returns its id, or NULL when there already is an admin. Raises invalid_input (YV001) when the name is taken by a non-admin';

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
COMMENT ON FUNCTION yuxi.token_create(uuid, bytea, text) IS
    'Adds an API token (p_token_hash = sha256 of the token) to a live user; returns its id. Raises invalid_input (YV001), not_found (YN001)';

-- The live user a token belongs to, or no row. last_used_at is refreshed at most once
-- a minute so authentication does not write on every request.
CREATE FUNCTION yuxi.token_authenticate(p_token_hash bytea)
RETURNS TABLE (uid uuid, name text, is_admin boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_token uuid;
    v_used timestamptz;
BEGIN
    SELECT u.id, u.name, u.is_admin, t.id, t.last_used_at
    INTO uid, name, is_admin, v_token, v_used
    FROM yuxi.api_tokens t JOIN yuxi.users u ON u.id = t.user_id
    WHERE t.token_hash = p_token_hash AND t.revoked_at IS NULL AND u.deleted_at IS NULL;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF v_used IS NULL OR v_used < now() - interval '1 minute' THEN
        UPDATE yuxi.api_tokens t SET last_used_at = now()
        WHERE t.id = v_token AND (t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute');
    END IF;
    RETURN NEXT;
END;
$$;
COMMENT ON FUNCTION yuxi.token_authenticate(bytea) IS
    'The live user a token hash belongs to (uid, name, is_admin), or no row; refreshes last_used_at at most once a minute';

-- Deletes a user: soft-deletes the account, revokes its tokens and removes its
-- scheduled jobs and their occurrences, in one transaction.
CREATE FUNCTION yuxi.user_delete(p_uid uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE yuxi.users SET deleted_at = now() WHERE id = p_uid AND deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'user % not found', p_uid USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    UPDATE yuxi.api_tokens SET revoked_at = now() WHERE user_id = p_uid AND revoked_at IS NULL;
    DELETE FROM yuxi.scheduled_agent_jobs WHERE uid = p_uid;  -- occurrences cascade
END;
$$;
COMMENT ON FUNCTION yuxi.user_delete(uuid) IS
    'Deletes a user: soft-deletes the account, revokes its tokens, removes its scheduled jobs and their occurrences. Raises not_found (YN001)';

-- A user's tokens, newest first: what an operator picks from to revoke one. Never the
-- token or its hash.
CREATE FUNCTION yuxi.token_list(p_uid uuid)
RETURNS TABLE (id uuid, name text, created_at timestamptz, last_used_at timestamptz,
               revoked_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM yuxi.users u WHERE u.id = p_uid AND u.deleted_at IS NULL) THEN
        RAISE EXCEPTION 'user % not found', p_uid USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN QUERY
    SELECT t.id, t.name, t.created_at, t.last_used_at, t.revoked_at
    FROM yuxi.api_tokens t WHERE t.user_id = p_uid
    ORDER BY t.created_at DESC, t.id;
END;
$$;
COMMENT ON FUNCTION yuxi.token_list(uuid) IS
    'A live user''s tokens, newest first (id, name, created, last used, revoked); never a token or its hash. Raises not_found (YN001)';

-- Revokes one token of a live user (p_token_id), or every token still active (NULL);
-- returns how many were revoked. A revoked token stops authenticating at once: every
-- request looks its hash up.
CREATE FUNCTION yuxi.token_revoke(p_uid uuid, p_token_id uuid DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_count integer;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM yuxi.users u WHERE u.id = p_uid AND u.deleted_at IS NULL) THEN
        RAISE EXCEPTION 'user % not found', p_uid USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    UPDATE yuxi.api_tokens t SET revoked_at = now()
    WHERE t.user_id = p_uid AND t.revoked_at IS NULL
      AND (p_token_id IS NULL OR t.id = p_token_id);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF p_token_id IS NOT NULL AND v_count = 0 THEN
        RAISE EXCEPTION 'token % of user % not found (or already revoked)', p_token_id, p_uid
            USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN v_count;
END;
$$;
COMMENT ON FUNCTION yuxi.token_revoke(uuid, uuid) IS
    'Revokes token p_token_id of a live user, or all its active tokens when NULL; returns how many. Raises not_found (YN001)';

-- Live users with how many tokens still authenticate them. Never a token or its hash.
CREATE FUNCTION yuxi.user_list()
RETURNS TABLE (id uuid, name text, is_admin boolean, active_tokens integer,
               last_used_at timestamptz, created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT u.id, u.name, u.is_admin,
           (SELECT count(*)::integer FROM yuxi.api_tokens t
            WHERE t.user_id = u.id AND t.revoked_at IS NULL),
           (SELECT max(t.last_used_at) FROM yuxi.api_tokens t WHERE t.user_id = u.id),
           u.created_at
    FROM yuxi.users u
    WHERE u.deleted_at IS NULL
    ORDER BY u.name
$$;
COMMENT ON FUNCTION yuxi.user_list() IS
    'Operators: live users with their number of active tokens and last use. Never a token or its hash';

-- The live user named p_name: whom a CLI option names (--as, --owner, --share-with,
-- --personal, --user).
CREATE FUNCTION yuxi.user_by_name(p_name text) RETURNS uuid
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_uid uuid;
BEGIN
    SELECT u.id INTO v_uid FROM yuxi.users u WHERE u.name = p_name AND u.deleted_at IS NULL;
    IF v_uid IS NULL THEN
        RAISE EXCEPTION 'user % not found', p_name USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN v_uid;
END;
$$;
COMMENT ON FUNCTION yuxi.user_by_name(text) IS
    'Operators: the id of the live user named p_name. Raises not_found (YN001)';
