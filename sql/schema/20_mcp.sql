-- yuxi: the MCP server registry. Platform servers (owner_uid NULL) are registered by
-- admins and shared like agents (share_scope all, admins, or selected users); a user's
-- own servers (share_scope owner) are theirs alone. Only admins register stdio servers
-- (a worker host runs their command).
--
-- Headers and environment variables are stored sealed (AES-256-GCM under the server
-- key, bound to the server's id: yuxi/models/secret_box.py), as one JSON object each;
-- only their names are kept in the clear, so the API can say which are set. Only the
-- worker that connects opens them.
--
-- Tool names in a run are <slug>__<tool>: a slug has no underscore, so the first "__"
-- splits a name unambiguously, and the servers one run sees have distinct slugs (a
-- user's own server shadows a platform one of the same slug).

CREATE TABLE yuxi.mcp_servers (
    id                       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_uid                uuid REFERENCES yuxi.users (id) ON DELETE CASCADE,
    slug                     text NOT NULL CHECK (slug ~ '^[a-z0-9]+(-[a-z0-9]+)*$' AND length(slug) <= 40),
    name                     text NOT NULL CHECK (length(btrim(name)) BETWEEN 1 AND 200),
    transport                text NOT NULL CHECK (transport IN ('streamable_http', 'sse', 'stdio')),
    url                      text CHECK (url ~ '^https?://\S+$' AND length(url) <= 2000),
    command                  text CHECK (length(btrim(command)) BETWEEN 1 AND 1000),
    args                     text[] NOT NULL DEFAULT '{}',
    header_names             text[] NOT NULL DEFAULT '{}',
    headers_sealed           bytea,
    env_names                text[] NOT NULL DEFAULT '{}',
    env_sealed               bytea,
    share_scope              text NOT NULL DEFAULT 'owner'
                             CHECK (share_scope IN ('owner', 'all', 'admins', 'selected')),
    enabled                  boolean NOT NULL DEFAULT true,
    connect_timeout_seconds  double precision NOT NULL DEFAULT 10
                             CHECK (connect_timeout_seconds > 0 AND connect_timeout_seconds <= 120),
    call_timeout_seconds     double precision NOT NULL DEFAULT 60
                             CHECK (call_timeout_seconds > 0 AND call_timeout_seconds <= 3600),
    created_at               timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at               timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- a user's own server is never shared; a platform server always is, some way
    CHECK ((owner_uid IS NULL) = (share_scope <> 'owner')),
    CHECK (CASE WHEN transport = 'stdio'
                THEN command IS NOT NULL AND url IS NULL AND header_names = '{}' AND headers_sealed IS NULL
                ELSE url IS NOT NULL AND command IS NULL AND args = '{}' AND env_names = '{}' AND env_sealed IS NULL END),
    CHECK ((headers_sealed IS NULL) = (header_names = '{}')),
    CHECK ((env_sealed IS NULL) = (env_names = '{}'))
);
CREATE UNIQUE INDEX mcp_servers_platform_slug_key ON yuxi.mcp_servers (slug) WHERE owner_uid IS NULL;
CREATE UNIQUE INDEX mcp_servers_owner_slug_key ON yuxi.mcp_servers (owner_uid, slug) WHERE owner_uid IS NOT NULL;
COMMENT ON TABLE yuxi.mcp_servers IS
    'MCP servers: platform ones (owner_uid NULL, admins, shared by share_scope) and users'' own HTTP servers. Headers and env are sealed by the server key, never stored in the clear';
COMMENT ON COLUMN yuxi.mcp_servers.headers_sealed IS
    'The HTTP headers as one JSON object, AES-256-GCM sealed under the server key, bound to the server id';
COMMENT ON COLUMN yuxi.mcp_servers.env_sealed IS
    'A stdio server''s environment variables as one JSON object, sealed like headers_sealed';

CREATE TABLE yuxi.mcp_server_shares (
    server_id  uuid NOT NULL REFERENCES yuxi.mcp_servers (id) ON DELETE CASCADE,
    uid        uuid NOT NULL REFERENCES yuxi.users (id) ON DELETE CASCADE,
    PRIMARY KEY (server_id, uid)
);
COMMENT ON TABLE yuxi.mcp_server_shares IS
    'The users who may use a platform MCP server whose share_scope is selected';

-- What a worker last discovered of a server's tools (GET /api/mcp-servers/{slug}/tools).
CREATE TABLE yuxi.mcp_tool_lists (
    server_id       uuid PRIMARY KEY REFERENCES yuxi.mcp_servers (id) ON DELETE CASCADE,
    -- the server row's updated_at the list was discovered for
    server_version  timestamptz NOT NULL,
    tools           jsonb NOT NULL DEFAULT '[]',
    error           text,
    requested_at    timestamptz NOT NULL,
    fetched_at      timestamptz
);
COMMENT ON TABLE yuxi.mcp_tool_lists IS
    'The tools a worker last discovered on an MCP server ([{name, description, input_schema}]) or the error it met; requested_at > fetched_at while a discovery is under way';

-- ---------------------------------------------------------------------------------
-- Access

-- Whether the live user p_uid may use the server (disabled ones aside): their own, or
-- a platform server shared with everyone, with admins when they are one, or with them.
CREATE FUNCTION yuxi.mcp_server_may_use(p_server yuxi.mcp_servers, p_uid uuid) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM yuxi.users u
        WHERE u.id = p_uid AND u.deleted_at IS NULL
          AND (p_server.owner_uid = u.id
               OR (p_server.owner_uid IS NULL
                   AND (p_server.share_scope = 'all'
                        OR u.is_admin
                        OR (p_server.share_scope = 'selected'
                            AND EXISTS (SELECT 1 FROM yuxi.mcp_server_shares s
                                        WHERE s.server_id = p_server.id AND s.uid = u.id))))))
$$;
COMMENT ON FUNCTION yuxi.mcp_server_may_use(yuxi.mcp_servers, uuid) IS
    'True when a live user may see and use the MCP server (their own, or a platform one shared with them; admins see every platform one)';

-- The servers a user sees, one per slug: their own, else the platform one.
CREATE FUNCTION yuxi.mcp_servers_visible(p_uid uuid) RETURNS SETOF yuxi.mcp_servers
LANGUAGE sql STABLE AS $$
    SELECT DISTINCT ON (m.slug) m.*
    FROM yuxi.mcp_servers m
    WHERE yuxi.mcp_server_may_use(m, p_uid)
    ORDER BY m.slug, m.owner_uid IS NULL
$$;
COMMENT ON FUNCTION yuxi.mcp_servers_visible(uuid) IS
    'Internal: the MCP servers a user sees, one per slug (their own shadows a platform one), by slug';

-- The server p_slug as the user sees it. With p_write, one they may change: their own,
-- or (an admin) the platform one. Not visible: not_found; visible but not theirs to
-- change: forbidden.
CREATE FUNCTION yuxi.mcp_server_access(p_uid uuid, p_slug text, p_write boolean DEFAULT false)
RETURNS yuxi.mcp_servers
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_row yuxi.mcp_servers;
BEGIN
    SELECT * INTO v_row FROM yuxi.mcp_servers_visible(p_uid) m WHERE m.slug = p_slug;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'MCP server % not found', p_slug USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    IF p_write AND v_row.owner_uid IS NULL
       AND NOT EXISTS (SELECT 1 FROM yuxi.users u WHERE u.id = p_uid AND u.is_admin) THEN
        RAISE EXCEPTION 'MCP server % is managed by admins', p_slug USING ERRCODE = 'YA001', HINT = 'forbidden';
    END IF;
    RETURN v_row;
END;
$$;
COMMENT ON FUNCTION yuxi.mcp_server_access(uuid, text, boolean) IS
    'Internal: the MCP server p_slug a user sees (and, with p_write, may change). Raises not_found (YN001), forbidden (YA001)';

-- ---------------------------------------------------------------------------------
-- Servers

-- A server as clients see it: never its headers or env, only their names.
CREATE TYPE yuxi.mcp_server_info AS (
    id                       uuid,
    owner_uid                uuid,
    slug                     text,
    name                     text,
    transport                text,
    url                      text,
    command                  text,
    args                     text[],
    header_names             text[],
    env_names                text[],
    share_scope              text,
    shared_with              uuid[],
    enabled                  boolean,
    connect_timeout_seconds  double precision,
    call_timeout_seconds     double precision,
    created_at               timestamptz,
    updated_at               timestamptz
);
COMMENT ON TYPE yuxi.mcp_server_info IS
    'An MCP server as the API shows it: the names of its headers and env, never their values';

CREATE FUNCTION yuxi.mcp_server_info_of(m yuxi.mcp_servers) RETURNS yuxi.mcp_server_info
LANGUAGE sql STABLE AS $$
    SELECT m.id, m.owner_uid, m.slug, m.name, m.transport, m.url, m.command, m.args,
           m.header_names, m.env_names, m.share_scope,
           coalesce((SELECT array_agg(s.uid ORDER BY s.uid) FROM yuxi.mcp_server_shares s
                     JOIN yuxi.users u ON u.id = s.uid AND u.deleted_at IS NULL
                     WHERE s.server_id = m.id), '{}'),
           m.enabled, m.connect_timeout_seconds, m.call_timeout_seconds, m.created_at, m.updated_at
$$;
COMMENT ON FUNCTION yuxi.mcp_server_info_of(yuxi.mcp_servers) IS
    'Internal: an mcp_servers row without its sealed headers and env';

-- Fields a client may set; anything else is refused.
CREATE FUNCTION yuxi.mcp_server_check_fields(p_fields jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_key text;
BEGIN
    IF jsonb_typeof(p_fields) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'MCP server fields must be a JSON object' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    FOR v_key IN SELECT jsonb_object_keys(p_fields) LOOP
        IF v_key NOT IN ('slug', 'name', 'transport', 'url', 'command', 'args', 'share_scope',
                         'enabled', 'connect_timeout_seconds', 'call_timeout_seconds') THEN
            RAISE EXCEPTION 'unknown MCP server field %', v_key USING ERRCODE = 'YV001', HINT = 'invalid_input';
        END IF;
    END LOOP;
    IF p_fields ? 'args' AND jsonb_typeof(p_fields->'args') <> 'array' THEN
        RAISE EXCEPTION 'args must be a list of strings' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.mcp_server_check_fields(jsonb) IS
    'Internal: raises invalid_input (YV001) for an MCP server field a client may not set';

-- Who may hold a server of this shape: a platform or stdio server needs an admin.
CREATE FUNCTION yuxi.mcp_server_check_owner(p_row yuxi.mcp_servers, p_uid uuid) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_admin boolean;
BEGIN
    SELECT u.is_admin INTO v_admin FROM yuxi.users u WHERE u.id = p_uid AND u.deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'user % not found', p_uid USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    IF v_admin THEN
        RETURN;
    END IF;
    IF p_row.transport = 'stdio' THEN
        RAISE EXCEPTION 'only admins may register stdio MCP servers (they run a command on the worker hosts)'
            USING ERRCODE = 'YA001', HINT = 'forbidden';
    END IF;
    IF p_row.share_scope <> 'owner' THEN
        RAISE EXCEPTION 'only admins may register shared MCP servers' USING ERRCODE = 'YA001', HINT = 'forbidden';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.mcp_server_check_owner(yuxi.mcp_servers, uuid) IS
    'Internal: raises forbidden (YA001) when a non-admin would hold a stdio or shared MCP server';

-- Replaces the users a selected platform server is shared with (live users only).
CREATE FUNCTION yuxi.mcp_server_share_set(p_row yuxi.mcp_servers, p_shared_with uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM yuxi.mcp_server_shares WHERE server_id = p_row.id;
    IF p_row.share_scope <> 'selected' THEN
        IF cardinality(coalesce(p_shared_with, '{}')) > 0 THEN
            RAISE EXCEPTION 'shared_with needs share_scope selected' USING ERRCODE = 'YV001', HINT = 'invalid_input';
        END IF;
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(coalesce(p_shared_with, '{}')) AS w(uid)
               WHERE NOT EXISTS (SELECT 1 FROM yuxi.users u WHERE u.id = w.uid AND u.deleted_at IS NULL)) THEN
        RAISE EXCEPTION 'shared_with names a user that does not exist' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    INSERT INTO yuxi.mcp_server_shares (server_id, uid)
    SELECT DISTINCT p_row.id, w.uid FROM unnest(coalesce(p_shared_with, '{}')) AS w(uid);
END;
$$;
COMMENT ON FUNCTION yuxi.mcp_server_share_set(yuxi.mcp_servers, uuid[]) IS
    'Internal: replaces the users a selected MCP server is shared with (none for another scope). Raises invalid_input (YV001)';

-- Registers a server for p_uid: their own (share_scope owner, the default) or a platform
-- one (any other scope; admins only). p_id is chosen by the caller, who seals the
-- headers and env bound to it.
CREATE FUNCTION yuxi.mcp_server_create(
    p_id uuid, p_uid uuid, p_fields jsonb, p_shared_with uuid[] DEFAULT '{}',
    p_header_names text[] DEFAULT '{}', p_headers_sealed bytea DEFAULT NULL,
    p_env_names text[] DEFAULT '{}', p_env_sealed bytea DEFAULT NULL
) RETURNS yuxi.mcp_server_info
LANGUAGE plpgsql AS $$
DECLARE
    v_row yuxi.mcp_servers;
    f jsonb := p_fields;
    v_scope text := coalesce(p_fields->>'share_scope', 'owner');
BEGIN
    PERFORM yuxi.mcp_server_check_fields(f);
    IF f->>'slug' IS NULL OR f->>'name' IS NULL OR f->>'transport' IS NULL THEN
        RAISE EXCEPTION 'an MCP server needs slug, name and transport' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_row := ROW(p_id, CASE WHEN v_scope = 'owner' THEN p_uid END, f->>'slug', f->>'name',
                 f->>'transport', f->>'url', f->>'command',
                 coalesce(ARRAY(SELECT jsonb_array_elements_text(f->'args')), '{}'),
                 coalesce(p_header_names, '{}'), p_headers_sealed, coalesce(p_env_names, '{}'),
                 p_env_sealed, v_scope, coalesce((f->>'enabled')::boolean, true),
                 coalesce((f->>'connect_timeout_seconds')::double precision, 10),
                 coalesce((f->>'call_timeout_seconds')::double precision, 60),
                 clock_timestamp(), clock_timestamp())::yuxi.mcp_servers;
    PERFORM yuxi.mcp_server_check_owner(v_row, p_uid);
    INSERT INTO yuxi.mcp_servers SELECT v_row.* ON CONFLICT DO NOTHING RETURNING * INTO v_row;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'MCP server % is already registered%', f->>'slug',
            CASE WHEN v_scope = 'owner' THEN ' for this user' ELSE '' END
            USING ERRCODE = 'YP001', HINT = 'mcp_server_exists';
    END IF;
    PERFORM yuxi.mcp_server_share_set(v_row, p_shared_with);
    RETURN yuxi.mcp_server_info_of(v_row);
EXCEPTION
    WHEN check_violation THEN
        RAISE EXCEPTION 'invalid MCP server: %', SQLERRM USING ERRCODE = 'YV001', HINT = 'invalid_input';
    WHEN invalid_text_representation OR numeric_value_out_of_range THEN
        RAISE EXCEPTION 'invalid MCP server field: %', SQLERRM USING ERRCODE = 'YV001', HINT = 'invalid_input';
END;
$$;
COMMENT ON FUNCTION yuxi.mcp_server_create(uuid, uuid, jsonb, uuid[], text[], bytea, text[], bytea) IS
    'Registers a user''s own MCP server (share_scope owner) or a platform one (admins); p_fields as the API body without headers and env, which come sealed. Raises invalid_input (YV001), forbidden (YA001), mcp_server_exists (YP001)';

-- Changes the fields present in p_fields (a JSON null clears url or command) and, with
-- p_set_headers / p_set_env, replaces the headers or env. A server stays its owner's or
-- a platform one: share_scope moves only among the platform scopes.
CREATE FUNCTION yuxi.mcp_server_update(
    p_uid uuid, p_slug text, p_fields jsonb, p_shared_with uuid[] DEFAULT NULL,
    p_set_headers boolean DEFAULT false, p_header_names text[] DEFAULT '{}',
    p_headers_sealed bytea DEFAULT NULL, p_set_env boolean DEFAULT false,
    p_env_names text[] DEFAULT '{}', p_env_sealed bytea DEFAULT NULL
) RETURNS yuxi.mcp_server_info
LANGUAGE plpgsql AS $$
DECLARE
    v_row yuxi.mcp_servers := yuxi.mcp_server_access(p_uid, p_slug, true);
    f jsonb := p_fields;
BEGIN
    PERFORM yuxi.mcp_server_check_fields(f);
    IF (f ? 'slug' AND f->>'slug' IS DISTINCT FROM p_slug) THEN
        RAISE EXCEPTION 'a server''s slug cannot change (its tools are named after it)' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF f ? 'share_scope' AND ((f->>'share_scope' = 'owner') <> (v_row.owner_uid IS NOT NULL)) THEN
        RAISE EXCEPTION 'a server cannot move between a user''s own and the platform''s; register it anew'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    PERFORM 1 FROM yuxi.mcp_servers m WHERE m.id = v_row.id FOR UPDATE;
    UPDATE yuxi.mcp_servers m SET
        name = CASE WHEN f ? 'name' THEN f->>'name' ELSE m.name END,
        transport = CASE WHEN f ? 'transport' THEN f->>'transport' ELSE m.transport END,
        url = CASE WHEN f ? 'url' THEN f->>'url' ELSE m.url END,
        command = CASE WHEN f ? 'command' THEN f->>'command' ELSE m.command END,
        args = CASE WHEN f ? 'args' THEN coalesce(ARRAY(SELECT jsonb_array_elements_text(f->'args')), '{}') ELSE m.args END,
        share_scope = CASE WHEN f ? 'share_scope' THEN f->>'share_scope' ELSE m.share_scope END,
        enabled = CASE WHEN f ? 'enabled' THEN coalesce((f->>'enabled')::boolean, true) ELSE m.enabled END,
        connect_timeout_seconds = CASE WHEN f ? 'connect_timeout_seconds'
            THEN coalesce((f->>'connect_timeout_seconds')::double precision, 10) ELSE m.connect_timeout_seconds END,
        call_timeout_seconds = CASE WHEN f ? 'call_timeout_seconds'
            THEN coalesce((f->>'call_timeout_seconds')::double precision, 60) ELSE m.call_timeout_seconds END,
        header_names = CASE WHEN p_set_headers THEN coalesce(p_header_names, '{}') ELSE m.header_names END,
        headers_sealed = CASE WHEN p_set_headers THEN p_headers_sealed ELSE m.headers_sealed END,
        env_names = CASE WHEN p_set_env THEN coalesce(p_env_names, '{}') ELSE m.env_names END,
        env_sealed = CASE WHEN p_set_env THEN p_env_sealed ELSE m.env_sealed END,
        updated_at = clock_timestamp()
    WHERE m.id = v_row.id
    RETURNING * INTO v_row;
    PERFORM yuxi.mcp_server_check_owner(v_row, p_uid);
    IF p_shared_with IS NOT NULL OR f ? 'share_scope' THEN
        PERFORM yuxi.mcp_server_share_set(v_row, coalesce(p_shared_with,
            CASE WHEN v_row.share_scope = 'selected'
                 THEN (SELECT array_agg(s.uid) FROM yuxi.mcp_server_shares s WHERE s.server_id = v_row.id) END));
    END IF;
    RETURN yuxi.mcp_server_info_of(v_row);
EXCEPTION
    WHEN check_violation THEN
        RAISE EXCEPTION 'invalid MCP server: %', SQLERRM USING ERRCODE = 'YV001', HINT = 'invalid_input';
    WHEN invalid_text_representation OR numeric_value_out_of_range THEN
        RAISE EXCEPTION 'invalid MCP server field: %', SQLERRM USING ERRCODE = 'YV001', HINT = 'invalid_input';
END;
$$;
COMMENT ON FUNCTION yuxi.mcp_server_update(uuid, text, jsonb, uuid[], boolean, text[], bytea, boolean, text[], bytea) IS
    'Changes an MCP server the user may change (their own; a platform one for admins): the fields present, and headers or env when p_set_*. Raises not_found (YN001), forbidden (YA001), invalid_input (YV001)';

CREATE FUNCTION yuxi.mcp_server_delete(p_uid uuid, p_slug text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_row yuxi.mcp_servers := yuxi.mcp_server_access(p_uid, p_slug, true);
BEGIN
    DELETE FROM yuxi.mcp_servers WHERE id = v_row.id;
END;
$$;
COMMENT ON FUNCTION yuxi.mcp_server_delete(uuid, text) IS
    'Removes an MCP server the user may change. Raises not_found (YN001), forbidden (YA001)';

CREATE FUNCTION yuxi.mcp_server_get(p_uid uuid, p_slug text) RETURNS yuxi.mcp_server_info
LANGUAGE sql STABLE AS $$
    SELECT yuxi.mcp_server_info_of(yuxi.mcp_server_access(p_uid, p_slug, false))
$$;
COMMENT ON FUNCTION yuxi.mcp_server_get(uuid, text) IS
    'API: the MCP server p_slug as the user sees it (their own shadows a platform one), without secrets. Raises not_found (YN001)';

CREATE FUNCTION yuxi.mcp_server_list(p_uid uuid) RETURNS SETOF yuxi.mcp_server_info
LANGUAGE sql STABLE AS $$
    SELECT (yuxi.mcp_server_info_of(m)).* FROM yuxi.mcp_servers_visible(p_uid) m ORDER BY m.slug
$$;
COMMENT ON FUNCTION yuxi.mcp_server_list(uuid) IS
    'API: the MCP servers a user sees, one per slug, without secrets';

-- What a run may connect to: the enabled servers the user sees, one per slug, with
-- what connecting needs (sealed headers and env: the worker opens them). p_slugs NULL
-- means all of them.
CREATE FUNCTION yuxi.mcp_server_connections(p_uid uuid, p_slugs text[] DEFAULT NULL)
RETURNS TABLE (id uuid, slug text, name text, transport text, url text, command text,
               args text[], headers_sealed bytea, env_sealed bytea,
               connect_timeout_seconds double precision, call_timeout_seconds double precision,
               updated_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT m.id, m.slug, m.name, m.transport, m.url, m.command, m.args, m.headers_sealed,
           m.env_sealed, m.connect_timeout_seconds, m.call_timeout_seconds, m.updated_at
    FROM yuxi.mcp_servers_visible(p_uid) m
    WHERE m.enabled AND (p_slugs IS NULL OR m.slug = ANY (p_slugs))
    ORDER BY m.slug
$$;
COMMENT ON FUNCTION yuxi.mcp_server_connections(uuid, text[]) IS
    'Worker: the enabled MCP servers a user may use (of p_slugs, or all), one per slug, with their sealed headers and env';

-- ---------------------------------------------------------------------------------
-- Tool discovery (a worker connects; the API reads what it found)

CREATE TYPE yuxi.mcp_tool_list AS (
    slug          text,
    tools         jsonb,
    error         text,
    fetched_at    timestamptz,
    pending       boolean
);
COMMENT ON TYPE yuxi.mcp_tool_list IS
    'The tools last discovered on an MCP server, or the error met; pending while a worker is asked to discover them';

-- The tools of the server p_slug the user sees. When none were discovered for its
-- current version within p_max_age, asks a worker (a procrastinate job on queue
-- yuxi_mcp; one waiting job per server) and says pending.
CREATE FUNCTION yuxi.mcp_tools_request(
    p_uid uuid, p_slug text, p_max_age interval DEFAULT '60 seconds', p_now timestamptz DEFAULT now()
) RETURNS yuxi.mcp_tool_list
LANGUAGE plpgsql AS $$
DECLARE
    v_row yuxi.mcp_servers := yuxi.mcp_server_access(p_uid, p_slug, false);
    v_list yuxi.mcp_tool_lists;
BEGIN
    SELECT * INTO v_list FROM yuxi.mcp_tool_lists l WHERE l.server_id = v_row.id FOR UPDATE;
    IF FOUND AND v_list.server_version = v_row.updated_at
       AND (v_list.requested_at > p_now - p_max_age
            OR v_list.fetched_at > p_now - p_max_age) THEN
        RETURN (v_row.slug, v_list.tools, v_list.error, v_list.fetched_at,
                v_list.fetched_at IS NULL OR v_list.fetched_at < v_list.requested_at)::yuxi.mcp_tool_list;
    END IF;
    INSERT INTO yuxi.mcp_tool_lists AS l (server_id, server_version, requested_at)
    VALUES (v_row.id, v_row.updated_at, p_now)
    ON CONFLICT (server_id) DO UPDATE SET server_version = excluded.server_version,
                                          requested_at = excluded.requested_at
    RETURNING * INTO v_list;
    IF NOT EXISTS (SELECT 1 FROM public.procrastinate_jobs j
                   WHERE j.queueing_lock = 'mcp:' || v_row.id::text AND j.status = 'todo') THEN
        PERFORM public.procrastinate_defer_jobs_v1(ARRAY[
            ROW('yuxi_mcp', 'discover_mcp_tools', 0, NULL, 'mcp:' || v_row.id::text,
                jsonb_build_object('server_id', v_row.id::text), NULL)::public.procrastinate_job_to_defer_v1
        ]);
    END IF;
    RETURN (v_row.slug, v_list.tools, v_list.error, v_list.fetched_at, true)::yuxi.mcp_tool_list;
END;
$$;
COMMENT ON FUNCTION yuxi.mcp_tools_request(uuid, text, interval, timestamptz) IS
    'API: the tools discovered on an MCP server the user sees, asking a worker to discover them again when older than p_max_age (pending until it has). Raises not_found (YN001)';

CREATE FUNCTION yuxi.mcp_tools_get(p_uid uuid, p_slug text) RETURNS yuxi.mcp_tool_list
LANGUAGE sql STABLE AS $$
    SELECT (m.slug, coalesce(l.tools, '[]'), l.error, l.fetched_at,
            l.server_id IS NULL OR l.fetched_at IS NULL OR l.fetched_at < l.requested_at
            OR l.server_version <> m.updated_at)::yuxi.mcp_tool_list
    FROM yuxi.mcp_server_access(p_uid, p_slug, false) m
    LEFT JOIN yuxi.mcp_tool_lists l ON l.server_id = m.id
$$;
COMMENT ON FUNCTION yuxi.mcp_tools_get(uuid, text) IS
    'API: the tools last discovered on an MCP server the user sees (pending while a discovery is under way). Raises not_found (YN001)';

-- What the discovery job connects with: the server's row, enabled or not.
CREATE FUNCTION yuxi.mcp_server_connection(p_id uuid)
RETURNS TABLE (id uuid, slug text, name text, transport text, url text, command text,
               args text[], headers_sealed bytea, env_sealed bytea,
               connect_timeout_seconds double precision, call_timeout_seconds double precision,
               updated_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT m.id, m.slug, m.name, m.transport, m.url, m.command, m.args, m.headers_sealed,
           m.env_sealed, m.connect_timeout_seconds, m.call_timeout_seconds, m.updated_at
    FROM yuxi.mcp_servers m WHERE m.id = p_id
$$;
COMMENT ON FUNCTION yuxi.mcp_server_connection(uuid) IS
    'Worker: one MCP server with its sealed headers and env, for the tool discovery job';

-- Stores what a discovery found for the server's version p_version (a list found for
-- a version since changed is dropped: the next request asks again).
CREATE FUNCTION yuxi.mcp_tools_store(
    p_id uuid, p_version timestamptz, p_tools jsonb, p_error text, p_now timestamptz DEFAULT now()
) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE yuxi.mcp_tool_lists l
    SET tools = coalesce(p_tools, '[]'), error = p_error, fetched_at = p_now
    WHERE l.server_id = p_id AND l.server_version = p_version;
    RETURN FOUND;
END;
$$;
COMMENT ON FUNCTION yuxi.mcp_tools_store(uuid, timestamptz, jsonb, text, timestamptz) IS
    'Worker: records the tools (or the error) a discovery found for an MCP server''s version; false when the server changed meanwhile';

-- ---------------------------------------------------------------------------------
-- Re-sealing (yuxi mcp rekey, after a rotation of the server key)

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
