-- The server key's identifier, recorded in the database: the first process to start
-- records its key's (a keyed hash, never the key), and a process with another key is
-- refused (yuxi.server_key_check); a rotation records the new one once every secret
-- is re-sealed (yuxi.server_key_rotate). A database migrated to this records the key
-- of the next process to start.

CREATE TABLE yuxi.server_key (
    singleton    boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    key_id       text NOT NULL CHECK (key_id ~ '^[0-9a-f]{32}$'),
    recorded_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE yuxi.server_key IS
    'One row: the identifier of the server key that seals this database''s secrets (a keyed hash of it, never the key), recorded by the first process to start';

-- Records p_key_id when nothing is recorded yet, then compares: 'recorded' (this call
-- recorded it), 'current' (the recorded one is p_key_id), 'previous' (it is one of
-- p_previous_ids: a rotation under way), or 'other' (neither: the caller must not
-- start). Two first processes racing agree: the second waits for the first's insert and
-- compares with it.
CREATE FUNCTION yuxi.server_key_check(
    p_key_id text, p_previous_ids text[] DEFAULT '{}', p_now timestamptz DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_recorded text;
BEGIN
    INSERT INTO yuxi.server_key (key_id, recorded_at)
    VALUES (p_key_id, coalesce(p_now, clock_timestamp()))
    ON CONFLICT (singleton) DO NOTHING;
    IF FOUND THEN
        RETURN 'recorded';
    END IF;
    SELECT k.key_id INTO v_recorded FROM yuxi.server_key k;
    IF v_recorded = p_key_id THEN
        RETURN 'current';
    ELSIF v_recorded = ANY (coalesce(p_previous_ids, '{}')) THEN
        RETURN 'previous';
    END IF;
    RETURN 'other';
END;
$$;
COMMENT ON FUNCTION yuxi.server_key_check(text, text[], timestamptz) IS
    'Every process at start: records p_key_id (a server key''s identifier) when none is recorded, then says how it compares with the recorded one: recorded, current, previous (one of p_previous_ids) or other (the process must not start)';

-- After a rotation, once every secret is sealed under p_key_id: records it in place of
-- the previous key's identifier. True when p_key_id is recorded now (it was already, or
-- the recorded one was among p_previous_ids, or none was); false when another key's is
-- recorded, which is left as it is.
CREATE FUNCTION yuxi.server_key_rotate(
    p_key_id text, p_previous_ids text[] DEFAULT '{}', p_now timestamptz DEFAULT NULL
) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF yuxi.server_key_check(p_key_id, p_previous_ids, p_now) IN ('recorded', 'current') THEN
        RETURN true;
    END IF;
    UPDATE yuxi.server_key
    SET key_id = p_key_id, recorded_at = coalesce(p_now, clock_timestamp())
    WHERE key_id = ANY (coalesce(p_previous_ids, '{}'));
    RETURN FOUND;
END;
$$;
COMMENT ON FUNCTION yuxi.server_key_rotate(text, text[], timestamptz) IS
    'yuxi model rekey and yuxi mcp rekey, once every secret is re-sealed: records p_key_id in place of a previous key''s identifier (one of p_previous_ids); true when p_key_id is recorded now, false when another key''s is (left as it is)';
