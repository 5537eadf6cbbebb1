-- yuxi.user_seed_admin: `yuxi up` seeds its first admin through SQL instead of counting
-- admins from Python, and two first starts at once seed one admin, not a failed second.

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
