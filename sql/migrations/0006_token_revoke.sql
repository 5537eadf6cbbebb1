-- Operators revoke API tokens (one, or all of a user's) and list them, from the CLI,
-- an admin route or psql: yuxi.token_list, yuxi.token_revoke.

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
