-- The wrapper layer: what Python read or wrote on tables outside yuxi/queue/ becomes
-- SQL functions, called through their wrappers: a user by name (whom a CLI option
-- names), the embedding models a knowledge search embeds its query with, and the
-- re-sealing of MCP servers' headers and env (yuxi mcp rekey). The sealed key's column
-- comment names the secret box where it now is (yuxi/models/secret_box.py).

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

-- The embedding models of the knowledge bases p_kb_ids, each once, by name: what a
-- search embeds its query with before yuxi.kb_search (none for full-text-only bases).
-- No access check: kb_search reads only the bases its user may read.
CREATE FUNCTION yuxi.kb_embedding_models(p_kb_ids uuid[]) RETURNS TABLE (embedding_model text)
LANGUAGE sql STABLE AS $$
    SELECT DISTINCT k.embedding_model FROM yuxi.knowledge_bases k
    WHERE k.id = ANY (p_kb_ids) AND k.embedding_model IS NOT NULL
    ORDER BY 1
$$;
COMMENT ON FUNCTION yuxi.kb_embedding_models(uuid[]) IS
    'The embedding models of the knowledge bases p_kb_ids, each once, by name (a search embeds its query with each); no access check';

-- Every stored sealed secret with its server's id: the servers' headers (kind
-- 'headers'), then their env ('env'), each by server id.
CREATE FUNCTION yuxi.mcp_server_sealed_secrets() RETURNS TABLE (id uuid, kind text, sealed bytea)
LANGUAGE sql STABLE AS $$
    SELECT m.id, s.kind, s.sealed
    FROM yuxi.mcp_servers m,
         LATERAL (VALUES (1, 'headers', m.headers_sealed), (2, 'env', m.env_sealed)) AS s (n, kind, sealed)
    WHERE s.sealed IS NOT NULL
    ORDER BY s.n, m.id
$$;
COMMENT ON FUNCTION yuxi.mcp_server_sealed_secrets() IS
    'Every MCP server''s sealed headers and env (kind headers or env) with the server id, for re-sealing under a new server key (yuxi mcp rekey)';

-- Replaces a server's sealed headers (p_kind 'headers') or env ('env') with the same
-- secrets sealed anew, if they are still p_old (changed meanwhile: left as they are);
-- true when replaced.
CREATE FUNCTION yuxi.mcp_server_reseal(p_id uuid, p_kind text, p_old bytea, p_new bytea)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF p_kind IS NULL OR p_kind NOT IN ('headers', 'env') OR p_new IS NULL THEN
        RAISE EXCEPTION 'mcp_server_reseal takes p_kind headers or env and a sealed p_new'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    UPDATE yuxi.mcp_servers m
    SET headers_sealed = CASE WHEN p_kind = 'headers' THEN p_new ELSE m.headers_sealed END,
        env_sealed = CASE WHEN p_kind = 'env' THEN p_new ELSE m.env_sealed END
    WHERE m.id = p_id
      AND CASE WHEN p_kind = 'headers' THEN m.headers_sealed ELSE m.env_sealed END = p_old;
    RETURN FOUND;
END;
$$;
COMMENT ON FUNCTION yuxi.mcp_server_reseal(uuid, text, bytea, bytea) IS
    'Replaces an MCP server''s sealed headers or env (p_kind) with re-sealed ones if they are still p_old (yuxi mcp rekey); true when replaced. Raises invalid_input (YV001) for another p_kind or a NULL p_new';

COMMENT ON COLUMN yuxi.models.api_key_sealed IS
    'The API key sealed with AES-256-GCM under the server key, bound to the model id (yuxi/models/secret_box.py)';
