-- yuxi: shared skills in the Agent Skills format (a SKILL.md with YAML front matter and
-- the files beside it), uploaded by admins, in immutable versions.
--
-- A skill is named by its slug (the front matter's `name`). Each upload whose files
-- differ from the latest version's adds version n+1; the same files again add nothing.
-- A version's sha256 is computed here, from its files (yuxi.skill_digest), so the digest
-- a manifest records always describes the bytes stored. Versions and their files have no
-- UPDATE path: a trigger refuses any change (deleting the skill removes them all).
--
-- Dependencies (other skills, built-in tools, MCP servers) come from the front matter;
-- a skill's dependencies on other skills must exist and must not close a cycle. That is
-- checked under one transaction-scoped advisory lock, so two uploads racing to make
-- a -> b and b -> a cannot both pass.
--
-- Sharing is like agents': 'all' (every user), 'selected' (skill_shares) or 'owner'
-- (the admin who uploaded it); admins may use every skill. Personal skills live in a
-- user's workspace (skills/<slug>/SKILL.md) and are read by the worker, not stored here.

CREATE FUNCTION yuxi.skill_slug_is_valid(p_slug text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_slug ~ '^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$' AND position('--' IN p_slug) = 0
$$;
COMMENT ON FUNCTION yuxi.skill_slug_is_valid(text) IS
    'True for a skill name of the Agent Skills format: 1 to 64 lowercase letters, digits and single hyphens, not at either end';

CREATE FUNCTION yuxi.skill_file_path_is_valid(p_path text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT octet_length(p_path) BETWEEN 1 AND 1024
       AND p_path !~ '(^/|\\|//|/$)'
       AND NOT ('..' = ANY (string_to_array(p_path, '/')))
       AND NOT ('.' = ANY (string_to_array(p_path, '/')))
$$;
COMMENT ON FUNCTION yuxi.skill_file_path_is_valid(text) IS
    'True for a file path inside a skill: relative, /-separated, without empty, . or .. components';

-- The canonical digest of a file set: sha256 over every file in path order (bytewise),
-- each as path, NUL, its length in decimal, NUL, its bytes. The worker computes the
-- same for a personal skill (yuxi/skills/format.py).
CREATE FUNCTION yuxi.skill_digest(p_paths text[], p_contents bytea[]) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT encode(sha256(coalesce(string_agg(
        convert_to(f.path, 'UTF8') || '\x00'::bytea
        || convert_to(octet_length(f.content)::text, 'UTF8') || '\x00'::bytea || f.content,
        ''::bytea ORDER BY convert_to(f.path, 'UTF8')), ''::bytea)), 'hex')
    FROM unnest(p_paths, p_contents) AS f (path, content)
$$;
COMMENT ON FUNCTION yuxi.skill_digest(text[], bytea[]) IS
    'sha256 (hex) of a skill''s canonical file set: files in bytewise path order, each path || NUL || length || NUL || bytes';

CREATE TABLE yuxi.skills (
    slug            text PRIMARY KEY CHECK (yuxi.skill_slug_is_valid(slug)),
    share_scope     text NOT NULL DEFAULT 'all' CHECK (share_scope IN ('owner', 'selected', 'all')),
    created_by      uuid REFERENCES yuxi.users (id) ON DELETE SET NULL,
    latest_version  integer NOT NULL DEFAULT 0 CHECK (latest_version >= 0),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE yuxi.skills IS
    'Shared skills: a slug (the SKILL.md name), who may use it (share_scope owner, selected, all), its latest version';

CREATE TABLE yuxi.skill_shares (
    skill_slug  text NOT NULL REFERENCES yuxi.skills (slug) ON DELETE CASCADE,
    uid         uuid NOT NULL REFERENCES yuxi.users (id) ON DELETE CASCADE,
    PRIMARY KEY (skill_slug, uid)
);
CREATE INDEX skill_shares_uid_idx ON yuxi.skill_shares (uid);
COMMENT ON TABLE yuxi.skill_shares IS
    'The users who may use a skill whose share_scope is selected';

CREATE TABLE yuxi.skill_versions (
    slug            text NOT NULL REFERENCES yuxi.skills (slug) ON DELETE CASCADE,
    version         integer NOT NULL CHECK (version >= 1),
    sha256          text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    description     text NOT NULL CHECK (length(btrim(description)) BETWEEN 1 AND 1024),
    front_matter    jsonb NOT NULL CHECK (jsonb_typeof(front_matter) = 'object'),
    depends_skills  text[] NOT NULL DEFAULT '{}',
    depends_tools   text[] NOT NULL DEFAULT '{}',
    depends_mcps    text[] NOT NULL DEFAULT '{}',
    files           integer NOT NULL CHECK (files >= 1),
    bytes           bigint NOT NULL CHECK (bytes >= 0),
    created_by      uuid REFERENCES yuxi.users (id) ON DELETE SET NULL,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (slug, version),
    CHECK (NOT (slug = ANY (depends_skills)))
);
COMMENT ON TABLE yuxi.skill_versions IS
    'Immutable versions of a shared skill: the sha256 of its files, its front matter, what it depends on (skills, built-in tools, MCP servers)';

CREATE TABLE yuxi.skill_files (
    slug     text NOT NULL,
    version  integer NOT NULL,
    path     text NOT NULL CHECK (yuxi.skill_file_path_is_valid(path)),
    content  bytea NOT NULL,
    PRIMARY KEY (slug, version, path),
    FOREIGN KEY (slug, version) REFERENCES yuxi.skill_versions (slug, version) ON DELETE CASCADE
);
COMMENT ON TABLE yuxi.skill_files IS
    'The files of a skill version (SKILL.md and those beside it), as stored bytes';

-- Versions are immutable: no UPDATE of a version or of its files ever succeeds.
CREATE FUNCTION yuxi.skill_version_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'skill versions are immutable; upload a new version instead'
        USING ERRCODE = 'YT001', HINT = 'illegal_transition';
END;
$$;
COMMENT ON FUNCTION yuxi.skill_version_immutable() IS
    'Trigger: refuses every UPDATE of a skill version or its files (illegal_transition YT001)';
CREATE TRIGGER skill_versions_immutable BEFORE UPDATE ON yuxi.skill_versions
    FOR EACH ROW EXECUTE FUNCTION yuxi.skill_version_immutable();
CREATE TRIGGER skill_files_immutable BEFORE UPDATE ON yuxi.skill_files
    FOR EACH ROW EXECUTE FUNCTION yuxi.skill_version_immutable();

-- Whether the live user p_uid may use the skill (NULL: an operator, every skill).
CREATE FUNCTION yuxi.skill_may_use(p_skill yuxi.skills, p_uid uuid) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT p_uid IS NULL OR EXISTS (
        SELECT 1 FROM yuxi.users u
        WHERE u.id = p_uid AND u.deleted_at IS NULL
          AND (p_skill.share_scope = 'all' OR u.is_admin OR p_skill.created_by = p_uid
               OR (p_skill.share_scope = 'selected'
                   AND EXISTS (SELECT 1 FROM yuxi.skill_shares s
                               WHERE s.skill_slug = p_skill.slug AND s.uid = p_uid))))
$$;
COMMENT ON FUNCTION yuxi.skill_may_use(yuxi.skills, uuid) IS
    'True when a live user may use a shared skill (share scope all, an admin, its uploader, or shared with them); always for NULL (an operator)';

-- The latest version of every skill p_uid may use, by slug: what the catalog, the API
-- and a run's preparation read (the user is looked up once, not per skill).
CREATE FUNCTION yuxi.skills_usable(p_uid uuid)
RETURNS TABLE (slug text, version integer, sha256 text, description text,
               depends_skills text[], depends_tools text[], depends_mcps text[], files integer,
               bytes bigint, share_scope text, shared_with uuid[], created_at timestamptz,
               updated_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT s.slug, v.version, v.sha256, v.description, v.depends_skills,
           v.depends_tools, v.depends_mcps, v.files, v.bytes, s.share_scope,
           coalesce((SELECT array_agg(sh.uid ORDER BY sh.uid) FROM yuxi.skill_shares sh
                     WHERE sh.skill_slug = s.slug), '{}'),
           s.created_at, s.updated_at
    FROM yuxi.skills s
    JOIN yuxi.skill_versions v ON v.slug = s.slug AND v.version = s.latest_version
    LEFT JOIN yuxi.users u ON u.id = p_uid AND u.deleted_at IS NULL
    WHERE p_uid IS NULL
       OR (u.id IS NOT NULL
           AND (s.share_scope = 'all' OR u.is_admin OR s.created_by = p_uid
                OR (s.share_scope = 'selected'
                    AND EXISTS (SELECT 1 FROM yuxi.skill_shares sh
                                WHERE sh.skill_slug = s.slug AND sh.uid = p_uid))))
    ORDER BY s.slug
$$;
COMMENT ON FUNCTION yuxi.skills_usable(uuid) IS
    'The latest version of each shared skill a user may use (NULL: every skill), by slug; the same rule as yuxi.skill_may_use';

-- Every version of a skill p_uid may use, newest first; not_found otherwise.
CREATE FUNCTION yuxi.skill_versions_of(p_uid uuid, p_slug text)
RETURNS TABLE (slug text, version integer, sha256 text, description text, files integer,
               bytes bigint, created_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM yuxi.skills s WHERE s.slug = p_slug AND yuxi.skill_may_use(s, p_uid)) THEN
        RAISE EXCEPTION 'skill % not found', p_slug USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN QUERY
        SELECT v.slug, v.version, v.sha256, v.description, v.files, v.bytes, v.created_at
        FROM yuxi.skill_versions v WHERE v.slug = p_slug ORDER BY v.version DESC;
END;
$$;
COMMENT ON FUNCTION yuxi.skill_versions_of(uuid, text) IS
    'The versions of a skill the user may use, newest first. Raises not_found (YN001)';

-- The files of one version (the latest for a NULL p_version) of a skill p_uid may use.
CREATE FUNCTION yuxi.skill_files_of(p_uid uuid, p_slug text, p_version integer DEFAULT NULL)
RETURNS TABLE (version integer, sha256 text, path text, content bytea)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_version integer;
    v_sha256 text;
BEGIN
    SELECT v.version, v.sha256 INTO v_version, v_sha256
    FROM yuxi.skills s JOIN yuxi.skill_versions v ON v.slug = s.slug
    WHERE s.slug = p_slug AND yuxi.skill_may_use(s, p_uid)
      AND v.version = coalesce(p_version, s.latest_version);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skill % version % not found', p_slug, coalesce(p_version::text, 'latest')
            USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN QUERY
        SELECT v_version, v_sha256, f.path, f.content FROM yuxi.skill_files f
        WHERE f.slug = p_slug AND f.version = v_version ORDER BY convert_to(f.path, 'UTF8');
END;
$$;
COMMENT ON FUNCTION yuxi.skill_files_of(uuid, text, integer) IS
    'The files of a skill version (latest by default) the user may use, in path order. Raises not_found (YN001)';

-- The files of several versions at once (a worker writing the skills of a run under its
-- home for the first time); read as an operator: the run's access was checked when its
-- skills were listed (yuxi.skills_usable).
CREATE FUNCTION yuxi.skill_files_many(p_slugs text[], p_versions integer[])
RETURNS TABLE (slug text, version integer, path text, content bytea)
LANGUAGE sql STABLE AS $$
    SELECT f.slug, f.version, f.path, f.content
    FROM unnest(p_slugs, p_versions) AS w (slug, version)
    JOIN yuxi.skill_files f ON f.slug = w.slug AND f.version = w.version
    ORDER BY f.slug, f.version, convert_to(f.path, 'UTF8')
$$;
COMMENT ON FUNCTION yuxi.skill_files_many(text[], integer[]) IS
    'Operator/worker: the files of the given (slug, version) pairs, by slug, version and path';

-- Adds a version of a shared skill (creating the skill) unless its files equal the
-- latest version's; admins and operators only. Refuses a dependency on a skill that does
-- not exist and one that closes a cycle. p_share_scope NULL keeps the skill's sharing
-- (a new skill: 'all'); p_shared_with replaces the shares of a 'selected' one.
CREATE FUNCTION yuxi.skill_add(
    p_uid uuid, p_slug text, p_description text, p_front_matter jsonb,
    p_paths text[], p_contents bytea[],
    p_skills text[] DEFAULT '{}', p_tools text[] DEFAULT '{}', p_mcps text[] DEFAULT '{}',
    p_share_scope text DEFAULT NULL, p_shared_with uuid[] DEFAULT NULL
)
RETURNS TABLE (slug text, version integer, sha256 text, created boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_skill yuxi.skills;
    v_sha256 text;
    v_latest text;
    v_missing text;
    v_cycle text[];
    v_bytes bigint;
BEGIN
    IF p_uid IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM yuxi.users u WHERE u.id = p_uid AND u.is_admin AND u.deleted_at IS NULL) THEN
        RAISE EXCEPTION 'only admins may add shared skills' USING ERRCODE = 'YA001', HINT = 'forbidden';
    END IF;
    IF p_slug IS NULL OR NOT yuxi.skill_slug_is_valid(p_slug) THEN
        RAISE EXCEPTION 'invalid skill name %: 1 to 64 lowercase letters, digits and single hyphens', p_slug
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF coalesce(cardinality(p_paths), 0) = 0 OR cardinality(p_paths) <> cardinality(p_contents)
       OR NOT ('SKILL.md' = ANY (p_paths)) THEN
        RAISE EXCEPTION 'a skill is a SKILL.md and the files beside it (one content per path)'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF (SELECT count(DISTINCT p) FROM unnest(p_paths) AS p) <> cardinality(p_paths)
       OR EXISTS (SELECT 1 FROM unnest(p_paths) AS p WHERE NOT yuxi.skill_file_path_is_valid(p)) THEN
        RAISE EXCEPTION 'skill file paths must be distinct, relative and without . or .. components'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF cardinality(p_paths) > 500 THEN
        RAISE EXCEPTION 'a skill has at most 500 files' USING ERRCODE = 'YF001', HINT = 'payload_too_large';
    END IF;
    SELECT sum(octet_length(c)) INTO v_bytes FROM unnest(p_contents) AS c;
    IF v_bytes > 16 * 1024 * 1024 THEN
        RAISE EXCEPTION 'a skill holds at most 16 MiB of files' USING ERRCODE = 'YF001', HINT = 'payload_too_large';
    END IF;
    IF p_share_scope IS NOT NULL AND p_share_scope NOT IN ('owner', 'selected', 'all') THEN
        RAISE EXCEPTION 'share_scope is owner, selected or all' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_slug = ANY (coalesce(p_skills, '{}')) THEN
        RAISE EXCEPTION 'skill % cannot depend on itself', p_slug USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;

    -- one dependency graph change at a time: the checks below see every committed edge
    PERFORM pg_advisory_xact_lock(7420117021);
    SELECT string_agg(d, ', ' ORDER BY d) INTO v_missing
    FROM unnest(coalesce(p_skills, '{}')) AS d
    WHERE NOT EXISTS (SELECT 1 FROM yuxi.skills s WHERE s.slug = d AND s.latest_version > 0);
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION 'skill % depends on skills that do not exist: %', p_slug, v_missing
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    WITH RECURSIVE reach (skill, path) AS (
        SELECT d, ARRAY[p_slug, d] FROM unnest(coalesce(p_skills, '{}')) AS d
        UNION ALL
        SELECT dep, r.path || dep
        FROM reach r
        JOIN yuxi.skills s ON s.slug = r.skill
        JOIN yuxi.skill_versions v ON v.slug = s.slug AND v.version = s.latest_version
        CROSS JOIN LATERAL unnest(v.depends_skills) AS dep
        WHERE r.skill <> p_slug AND NOT (dep = ANY (r.path[2:]))
    )
    SELECT r.path INTO v_cycle FROM reach r WHERE r.skill = p_slug LIMIT 1;
    IF v_cycle IS NOT NULL THEN
        RAISE EXCEPTION 'skill dependency cycle: %', array_to_string(v_cycle, ' -> ')
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;

    INSERT INTO yuxi.skills AS s (slug, share_scope, created_by)
    VALUES (p_slug, coalesce(p_share_scope, 'all'), p_uid)
    ON CONFLICT ON CONSTRAINT skills_pkey DO NOTHING;
    SELECT * INTO v_skill FROM yuxi.skills s WHERE s.slug = p_slug FOR UPDATE;

    IF p_share_scope IS NOT NULL THEN
        UPDATE yuxi.skills s SET share_scope = p_share_scope, updated_at = clock_timestamp()
        WHERE s.slug = p_slug;
    END IF;
    IF p_shared_with IS NOT NULL THEN
        DELETE FROM yuxi.skill_shares sh WHERE sh.skill_slug = p_slug;
        INSERT INTO yuxi.skill_shares (skill_slug, uid)
        SELECT p_slug, u.id FROM yuxi.users u
        WHERE u.id = ANY (p_shared_with) AND u.deleted_at IS NULL
        ON CONFLICT DO NOTHING;
    END IF;

    v_sha256 := yuxi.skill_digest(p_paths, p_contents);
    SELECT v.sha256 INTO v_latest FROM yuxi.skill_versions v
    WHERE v.slug = p_slug AND v.version = v_skill.latest_version;
    IF v_latest = v_sha256 THEN
        RETURN QUERY SELECT p_slug, v_skill.latest_version, v_sha256, false;
        RETURN;
    END IF;

    INSERT INTO yuxi.skill_versions (slug, version, sha256, description, front_matter,
                                     depends_skills, depends_tools, depends_mcps, files, bytes, created_by)
    VALUES (p_slug, v_skill.latest_version + 1, v_sha256, btrim(coalesce(p_description, '')),
            coalesce(p_front_matter, '{}'),
            coalesce(p_skills, '{}'), coalesce(p_tools, '{}'), coalesce(p_mcps, '{}'),
            cardinality(p_paths), coalesce(v_bytes, 0), p_uid);
    INSERT INTO yuxi.skill_files (slug, version, path, content)
    SELECT p_slug, v_skill.latest_version + 1, f.path, f.content
    FROM unnest(p_paths, p_contents) AS f (path, content);
    UPDATE yuxi.skills s SET latest_version = v_skill.latest_version + 1, updated_at = clock_timestamp()
    WHERE s.slug = p_slug;
    RETURN QUERY SELECT p_slug, v_skill.latest_version + 1, v_sha256, true;
END;
$$;
COMMENT ON FUNCTION yuxi.skill_add(uuid, text, text, jsonb, text[], bytea[], text[], text[], text[], text, uuid[]) IS
    'Admin/operator: adds version n+1 of a shared skill unless its files equal the latest; refuses missing skill dependencies and cycles. Raises forbidden (YA001), invalid_input (YV001), payload_too_large (YF001)';

-- Deletes a shared skill and every version; admins and operators only. Skills that
-- depend on it keep their versions: a run that needs it fails at preparation.
CREATE FUNCTION yuxi.skill_delete(p_uid uuid, p_slug text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_uid IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM yuxi.users u WHERE u.id = p_uid AND u.is_admin AND u.deleted_at IS NULL) THEN
        RAISE EXCEPTION 'only admins may delete shared skills' USING ERRCODE = 'YA001', HINT = 'forbidden';
    END IF;
    PERFORM pg_advisory_xact_lock(7420117021);
    DELETE FROM yuxi.skills s WHERE s.slug = p_slug;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'skill % not found', p_slug USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.skill_delete(uuid, text) IS
    'Admin/operator: deletes a shared skill with its versions and files. Raises forbidden (YA001), not_found (YN001)';
