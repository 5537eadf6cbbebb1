-- Files live in PostgreSQL: the file store (sql/schema/26_file_store.sql, new in full).

-- yuxi: the file store. Every file a user needs lives here, so every host sees the same
-- files and one dump is the whole state (yuxi/files/store.py is the one interface).
--
-- A file is a row of a tree (yuxi.files): a user's workspace (agents/AGENTS.md,
-- USER.md, MEMORY.md, personal skills), a conversation's or a project's workdir
-- (uploads/, outputs/, whatever the agent writes), or a knowledge base (its documents'
-- originals). Its bytes are a content (yuxi.file_contents): chunks of bytea of exactly
-- 1 MiB but the last (yuxi.file_chunks), named by their SHA-256 within their owner and
-- never shared across owners, so nobody learns that another user holds the same bytes.
--
-- Writing a file: yuxi.file_content_begin opens a content under a writer's lease,
-- yuxi.file_content_append adds its chunks in order (each extends the lease), and
-- yuxi.file_put links it at a path in one transaction: it takes the tree's row lock,
-- checks the path, the per-file, per-tree and per-owner limits (yuxi.file_limits), and
-- keeps the owner's existing content of the same digest instead of a second copy.
-- yuxi.file_write does all three for a file small enough for one call. Contents no file
-- refers to are removed by yuxi.file_gc: an unfinished one only once its writer's lease
-- has run out, a finished one under a row lock a linking writer would hold.

-- A path inside a tree: relative, normalised (no empty, "." or ".." component, no
-- leading or trailing slash), no backslash, NUL or other control character, each
-- component at most 255 bytes, the whole at most 1024.
CREATE FUNCTION yuxi.file_path_is_valid(p_path text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_path ~ '^[^/\\[:cntrl:]]+(/[^/\\[:cntrl:]]+)*$'
       AND octet_length(p_path) <= 1024
       AND NOT EXISTS (SELECT 1 FROM unnest(string_to_array(p_path, '/')) AS c(part)
                       WHERE c.part IN ('.', '..') OR octet_length(c.part) > 255)
$$;
COMMENT ON FUNCTION yuxi.file_path_is_valid(text) IS
    'True for a path inside a file tree: relative and normalised (no empty, . or .. component), no backslash or control character, components of at most 255 bytes, at most 1024 bytes';

CREATE TABLE yuxi.file_limits (
    id               boolean PRIMARY KEY DEFAULT true CHECK (id),
    file_max_bytes   bigint NOT NULL DEFAULT 100 * 1024 * 1024 CHECK (file_max_bytes > 0),
    tree_max_bytes   bigint NOT NULL DEFAULT 1024 * 1024 * 1024 CHECK (tree_max_bytes > 0),
    owner_max_bytes  bigint NOT NULL DEFAULT 10 * 1024 * 1024 * 1024::bigint CHECK (owner_max_bytes > 0),
    tree_max_files   integer NOT NULL DEFAULT 100000 CHECK (tree_max_files > 0)
);
INSERT INTO yuxi.file_limits DEFAULT VALUES;
COMMENT ON TABLE yuxi.file_limits IS
    'The file store''s limits (one row): the largest file, the most bytes and files one tree (a workspace, a workdir, a knowledge base) may hold, and the most bytes one user''s trees may hold together. Change with UPDATE';

-- What a user's files take, for the per-owner limit; the row is the owner's lock.
CREATE TABLE yuxi.file_owners (
    uid    uuid PRIMARY KEY REFERENCES yuxi.users (id) ON DELETE CASCADE,
    bytes  bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0)
);
COMMENT ON TABLE yuxi.file_owners IS
    'Bytes of files each user''s trees hold (kept by yuxi.file_put and file_delete under this row''s lock)';

CREATE TABLE yuxi.file_trees (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_uid  uuid NOT NULL REFERENCES yuxi.users (id) ON DELETE CASCADE,
    kind       text NOT NULL CHECK (kind IN ('workspace', 'workdir', 'knowledge_base')),
    -- where the tree sits: '' (the workspace), the workdir relative to the owner's
    -- workspace (threads/<id>, projects/<dir>), or the knowledge base's id
    root       text NOT NULL CHECK (root = '' OR yuxi.file_path_is_valid(root)),
    bytes      bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0),
    files      integer NOT NULL DEFAULT 0 CHECK (files >= 0),
    -- one more with every change of its files: a cache that saw this version is current
    version    bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK ((kind = 'workspace') = (root = '')),
    CHECK (kind <> 'workdir' OR root ~ '^(threads|projects)/'),
    UNIQUE (owner_uid, kind, root)
);
COMMENT ON TABLE yuxi.file_trees IS
    'File trees: a user''s workspace, a workdir (threads/<id> or projects/<dir> of the owner''s workspace), a knowledge base; with what they hold. The row is the tree''s lock';

CREATE TABLE yuxi.file_contents (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner_uid          uuid NOT NULL REFERENCES yuxi.users (id) ON DELETE CASCADE,
    -- NULL until the content is linked by yuxi.file_put
    sha256             text CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    bytes              bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0),
    chunks             integer NOT NULL DEFAULT 0 CHECK (chunks >= 0),
    -- an unfinished content belongs to its writer until then
    writer_expires_at  timestamptz,
    created_at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK ((sha256 IS NULL) = (writer_expires_at IS NOT NULL))
);
CREATE UNIQUE INDEX file_contents_owner_digest ON yuxi.file_contents (owner_uid, sha256)
    WHERE sha256 IS NOT NULL;
COMMENT ON TABLE yuxi.file_contents IS
    'The bytes of files, as chunks (yuxi.file_chunks), named by SHA-256 within their owner; sha256 NULL while a writer is still adding chunks';

CREATE TABLE yuxi.file_chunks (
    content_id  bigint NOT NULL REFERENCES yuxi.file_contents (id) ON DELETE CASCADE,
    n           integer NOT NULL CHECK (n >= 0),
    data        bytea NOT NULL CHECK (octet_length(data) BETWEEN 1 AND 1048576),
    PRIMARY KEY (content_id, n)
);
ALTER TABLE yuxi.file_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
COMMENT ON TABLE yuxi.file_chunks IS
    'A content''s bytes: chunk n holds bytes n * 1 MiB onwards; every chunk but the last is exactly 1 MiB';

CREATE TABLE yuxi.files (
    tree_id         uuid NOT NULL REFERENCES yuxi.file_trees (id) ON DELETE CASCADE,
    path            text NOT NULL CHECK (yuxi.file_path_is_valid(path)),
    content_id      bigint NOT NULL REFERENCES yuxi.file_contents (id),
    bytes           bigint NOT NULL CHECK (bytes >= 0),
    sha256          text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    media_type      text NOT NULL CHECK (media_type ~ '^[a-z0-9.+-]+/[a-z0-9.+-]+$'),
    modified_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    written_by_uid  uuid REFERENCES yuxi.users (id) ON DELETE SET NULL,
    written_by_run  uuid,
    PRIMARY KEY (tree_id, path)
);
CREATE INDEX files_content ON yuxi.files (content_id);
COMMENT ON TABLE yuxi.files IS
    'Files: one row per path of a tree, naming its content, with who (a user, or a run) wrote it last';

-- The tree of the owner's kind and root, created when missing (it holds nothing yet).
CREATE FUNCTION yuxi.file_tree(p_owner_uid uuid, p_kind text, p_root text DEFAULT '')
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_id uuid;
BEGIN
    SELECT t.id INTO v_id FROM yuxi.file_trees t
    WHERE t.owner_uid = p_owner_uid AND t.kind = p_kind AND t.root = p_root;
    IF FOUND THEN
        RETURN v_id;
    END IF;
    INSERT INTO yuxi.file_trees (owner_uid, kind, root) VALUES (p_owner_uid, p_kind, p_root)
    ON CONFLICT (owner_uid, kind, root) DO NOTHING
    RETURNING id INTO v_id;
    IF v_id IS NULL THEN  -- another transaction made it first
        SELECT t.id INTO v_id FROM yuxi.file_trees t
        WHERE t.owner_uid = p_owner_uid AND t.kind = p_kind AND t.root = p_root;
    END IF;
    RETURN v_id;
EXCEPTION WHEN check_violation THEN
    RAISE EXCEPTION 'no file tree % at %', p_kind, p_root USING ERRCODE = 'YV001', HINT = 'invalid_input';
END;
$$;
COMMENT ON FUNCTION yuxi.file_tree(uuid, text, text) IS
    'The id of the user''s tree of a kind (workspace, workdir, knowledge_base) at a root, created when missing. Raises invalid_input (YV001)';

-- Opens a content for a writer, who owns it for p_lease_seconds after each chunk.
CREATE FUNCTION yuxi.file_content_begin(
    p_owner_uid uuid, p_lease_seconds double precision DEFAULT 300, p_now timestamptz DEFAULT NULL
) RETURNS bigint
LANGUAGE sql AS $$
    INSERT INTO yuxi.file_contents (owner_uid, writer_expires_at)
    VALUES (p_owner_uid, coalesce(p_now, clock_timestamp()) + make_interval(secs => p_lease_seconds))
    RETURNING id
$$;
COMMENT ON FUNCTION yuxi.file_content_begin(uuid, double precision, timestamptz) IS
    'Writer: opens a content to add chunks to; returns its id. Unlinked, it is removed once the writer''s lease runs out';

-- Gives up an unfinished content (a failed upload): its chunks go at once. A finished
-- one is left alone (files may name it).
CREATE FUNCTION yuxi.file_content_abort(p_content_id bigint) RETURNS boolean
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM yuxi.file_contents c WHERE c.id = p_content_id AND c.sha256 IS NULL
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM gone)
$$;
COMMENT ON FUNCTION yuxi.file_content_abort(bigint) IS
    'Writer: removes an unfinished content and its chunks (a failed upload); false when there was none';

-- Adds chunk p_n (the next one) of an unfinished content; every chunk before it must be
-- 1 MiB. Raises not_found (YN001) when the content is gone (the writer's lease ran out
-- and maintenance removed it), invalid_input (YV001) for a chunk out of order.
CREATE FUNCTION yuxi.file_content_append(
    p_content_id bigint, p_n integer, p_data bytea,
    p_lease_seconds double precision DEFAULT 300, p_now timestamptz DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_content yuxi.file_contents;
BEGIN
    SELECT * INTO v_content FROM yuxi.file_contents c WHERE c.id = p_content_id FOR UPDATE;
    IF NOT FOUND OR v_content.sha256 IS NOT NULL OR v_content.writer_expires_at < v_now THEN
        RAISE EXCEPTION 'upload % is gone or finished (its writer stopped for too long)', p_content_id
            USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    IF p_n <> v_content.chunks OR v_content.bytes <> p_n::bigint * 1048576
       OR p_data IS NULL OR octet_length(p_data) NOT BETWEEN 1 AND 1048576 THEN
        RAISE EXCEPTION 'chunk % does not follow chunk % of % bytes (chunks are 1 MiB but the last)',
            p_n, v_content.chunks - 1, v_content.bytes USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    INSERT INTO yuxi.file_chunks (content_id, n, data) VALUES (p_content_id, p_n, p_data);
    UPDATE yuxi.file_contents c
    SET chunks = c.chunks + 1, bytes = c.bytes + octet_length(p_data),
        writer_expires_at = v_now + make_interval(secs => p_lease_seconds)
    WHERE c.id = p_content_id;
    RETURN v_content.bytes + octet_length(p_data);
END;
$$;
COMMENT ON FUNCTION yuxi.file_content_append(bigint, integer, bytea, double precision, timestamptz) IS
    'Writer: adds the next chunk (1 MiB but the last) to an unfinished content and extends the writer''s lease; returns the bytes so far. Raises not_found (YN001), invalid_input (YV001)';

-- Finishes an unfinished content (the caller holds its row) as p_sha256: the owner's
-- content of that digest is kept instead when there is one, held FOR SHARE against
-- yuxi.file_gc until the caller commits, and the new one goes. Two writers finishing
-- the same new bytes at once: the second finds the first's. Returns the content kept.
CREATE FUNCTION yuxi.file_content_finish(p_owner_uid uuid, p_content_id bigint, p_sha256 text)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_kept bigint;
BEGIN
    LOOP
        SELECT c.id INTO v_kept FROM yuxi.file_contents c
        WHERE c.owner_uid = p_owner_uid AND c.sha256 = p_sha256 FOR SHARE;
        IF FOUND THEN
            DELETE FROM yuxi.file_contents c WHERE c.id = p_content_id;
            RETURN v_kept;
        END IF;
        BEGIN
            UPDATE yuxi.file_contents c SET sha256 = p_sha256, writer_expires_at = NULL
            WHERE c.id = p_content_id;
            RETURN p_content_id;
        EXCEPTION WHEN unique_violation THEN
            -- another writer finished the same bytes first: keep theirs
        END;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION yuxi.file_content_finish(uuid, bigint, text) IS
    'Internal: finishes a content as a digest, keeping the owner''s existing content of that digest instead when there is one';

CREATE TYPE yuxi.file_info AS (
    path            text,
    bytes           bigint,
    sha256          text,
    media_type      text,
    modified_at     timestamptz,
    content_id      bigint,
    chunks          integer,
    written_by_uid  uuid,
    written_by_run  uuid
);
COMMENT ON TYPE yuxi.file_info IS
    'A file of a tree: its path, size, digest, media type, when and by whom it was last written, and its content (id and chunk count)';

-- Links an unfinished content (of the tree's owner, with every chunk added) at p_path
-- of the tree as one file, in place of what was there, and finishes it as p_sha256:
-- the owner's existing content of that digest is kept instead when there is one (the
-- new chunks go). Under the tree's and the owner's row locks, so no number of
-- concurrent writers can take a tree or an owner past its limit. Raises invalid_input
-- (YV001) for a bad path or digest, not_found (YN001) for a content that is gone,
-- payload_too_large (YF001) past a limit.
CREATE FUNCTION yuxi.file_put(
    p_tree_id uuid, p_path text, p_content_id bigint, p_sha256 text,
    p_media_type text DEFAULT 'application/octet-stream',
    p_writer_uid uuid DEFAULT NULL, p_writer_run uuid DEFAULT NULL,
    p_now timestamptz DEFAULT NULL, p_replaces text DEFAULT NULL
) RETURNS yuxi.file_info
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_tree yuxi.file_trees;
    v_limits yuxi.file_limits;
    v_content yuxi.file_contents;
    v_kept bigint;
    v_old yuxi.files;
    v_owner_bytes bigint;
    v_file yuxi.files;
BEGIN
    IF NOT coalesce(yuxi.file_path_is_valid(p_path), false) THEN
        RAISE EXCEPTION 'invalid file path %', p_path USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_sha256 IS NULL OR p_sha256 !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'invalid sha256 %', p_sha256 USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_media_type IS NULL OR p_media_type !~ '^[a-z0-9.+-]+/[a-z0-9.+-]+$' THEN
        RAISE EXCEPTION 'invalid media type %', p_media_type USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    -- lock order: the tree, the owner, the content
    SELECT * INTO v_tree FROM yuxi.file_trees t WHERE t.id = p_tree_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'file tree % not found', p_tree_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    INSERT INTO yuxi.file_owners (uid) VALUES (v_tree.owner_uid) ON CONFLICT (uid) DO NOTHING;
    SELECT o.bytes INTO v_owner_bytes FROM yuxi.file_owners o WHERE o.uid = v_tree.owner_uid FOR UPDATE;
    SELECT * INTO v_content FROM yuxi.file_contents c WHERE c.id = p_content_id FOR UPDATE;
    IF NOT FOUND OR v_content.sha256 IS NOT NULL OR v_content.owner_uid <> v_tree.owner_uid
       OR v_content.writer_expires_at < v_now THEN
        RAISE EXCEPTION 'upload % is gone or finished (its writer stopped for too long)', p_content_id
            USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    SELECT * INTO v_limits FROM yuxi.file_limits;
    SELECT * INTO v_old FROM yuxi.files f WHERE f.tree_id = p_tree_id AND f.path = p_path;
    -- a read-modify-write (a memory edit) replaces only the version it read
    IF p_replaces IS NOT NULL AND coalesce(v_old.sha256, '') <> p_replaces THEN
        RAISE EXCEPTION '% changed since it was read', p_path USING ERRCODE = 'YF002', HINT = 'file_changed';
    END IF;
    IF v_content.bytes > v_limits.file_max_bytes THEN
        RAISE EXCEPTION '% is % bytes; a file may have at most %', p_path, v_content.bytes,
            v_limits.file_max_bytes USING ERRCODE = 'YF001', HINT = 'payload_too_large';
    END IF;
    IF v_tree.bytes - coalesce(v_old.bytes, 0) + v_content.bytes > v_limits.tree_max_bytes THEN
        RAISE EXCEPTION 'the % would hold % bytes; it may hold at most % (% in use)',
            replace(v_tree.kind, '_', ' '), v_tree.bytes - coalesce(v_old.bytes, 0) + v_content.bytes,
            v_limits.tree_max_bytes, v_tree.bytes USING ERRCODE = 'YF001', HINT = 'payload_too_large';
    END IF;
    IF v_old.path IS NULL AND v_tree.files >= v_limits.tree_max_files THEN
        RAISE EXCEPTION 'the % holds % files, the most it may', replace(v_tree.kind, '_', ' '),
            v_tree.files USING ERRCODE = 'YF001', HINT = 'payload_too_large';
    END IF;
    IF v_owner_bytes - coalesce(v_old.bytes, 0) + v_content.bytes > v_limits.owner_max_bytes THEN
        RAISE EXCEPTION 'your files would take % bytes; you may keep at most % (% in use)',
            v_owner_bytes - coalesce(v_old.bytes, 0) + v_content.bytes, v_limits.owner_max_bytes,
            v_owner_bytes USING ERRCODE = 'YF001', HINT = 'payload_too_large';
    END IF;

    v_kept := yuxi.file_content_finish(v_tree.owner_uid, p_content_id, p_sha256);

    INSERT INTO yuxi.files AS f (tree_id, path, content_id, bytes, sha256, media_type,
                                 modified_at, written_by_uid, written_by_run)
    VALUES (p_tree_id, p_path, v_kept, v_content.bytes, p_sha256, p_media_type, v_now,
            p_writer_uid, p_writer_run)
    ON CONFLICT (tree_id, path) DO UPDATE
    SET content_id = EXCLUDED.content_id, bytes = EXCLUDED.bytes, sha256 = EXCLUDED.sha256,
        media_type = EXCLUDED.media_type, modified_at = EXCLUDED.modified_at,
        written_by_uid = EXCLUDED.written_by_uid, written_by_run = EXCLUDED.written_by_run
    RETURNING * INTO v_file;
    UPDATE yuxi.file_trees t
    SET bytes = t.bytes - coalesce(v_old.bytes, 0) + v_content.bytes,
        files = t.files + CASE WHEN v_old.path IS NULL THEN 1 ELSE 0 END,
        version = t.version + 1
    WHERE t.id = p_tree_id;
    UPDATE yuxi.file_owners o SET bytes = o.bytes - coalesce(v_old.bytes, 0) + v_content.bytes
    WHERE o.uid = v_tree.owner_uid;
    RETURN (v_file.path, v_file.bytes, v_file.sha256, v_file.media_type, v_file.modified_at,
            v_file.content_id, v_content.chunks, v_file.written_by_uid, v_file.written_by_run)::yuxi.file_info;
END;
$$;
COMMENT ON FUNCTION yuxi.file_put(uuid, text, bigint, text, text, uuid, uuid, timestamptz, text) IS
    'Writer: links an unfinished content at a path of a tree (replacing what was there; with p_replaces, only the file of that SHA-256, '''' for none) as one file with that SHA-256, within the limits of yuxi.file_limits. Raises invalid_input (YV001), not_found (YN001), payload_too_large (YF001), file_changed (YF002)';

-- A whole file passed as one value (split into 1 MiB chunks here) written in one call:
-- begin, append, put. For what a caller holds in memory anyway (a tool's write, a
-- workspace prompt); uploads stream their chunks instead.
CREATE FUNCTION yuxi.file_write(
    p_tree_id uuid, p_path text, p_data bytea,
    p_media_type text DEFAULT 'application/octet-stream',
    p_writer_uid uuid DEFAULT NULL, p_writer_run uuid DEFAULT NULL,
    p_now timestamptz DEFAULT NULL, p_replaces text DEFAULT NULL
) RETURNS yuxi.file_info
LANGUAGE plpgsql AS $$
DECLARE
    v_owner uuid;
    v_content bigint;
    v_n bigint := 0;
BEGIN
    SELECT t.owner_uid INTO v_owner FROM yuxi.file_trees t WHERE t.id = p_tree_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'file tree % not found', p_tree_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    v_content := yuxi.file_content_begin(v_owner, 300, p_now);
    WHILE v_n::bigint * 1048576 < octet_length(p_data) LOOP
        PERFORM yuxi.file_content_append(v_content, v_n::integer,
                                         substring(p_data FROM (v_n * 1048576 + 1)::integer FOR 1048576),
                                         300, p_now);
        v_n := v_n + 1;
    END LOOP;
    RETURN yuxi.file_put(p_tree_id, p_path, v_content, encode(sha256(p_data), 'hex'),
                         p_media_type, p_writer_uid, p_writer_run, p_now, p_replaces);
END;
$$;
COMMENT ON FUNCTION yuxi.file_write(uuid, text, bytea, text, uuid, uuid, timestamptz, text) IS
    'Writer: a whole file in one call (yuxi.file_content_begin, _append and yuxi.file_put). Raises as yuxi.file_put';

-- Removes the file at p_path of the tree (or, with p_prefix, every file under that
-- directory too); the number of files removed. Their contents go with yuxi.file_gc.
CREATE FUNCTION yuxi.file_delete(p_tree_id uuid, p_path text, p_prefix boolean DEFAULT false)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_tree yuxi.file_trees;
    v_files integer;
    v_bytes bigint;
BEGIN
    SELECT * INTO v_tree FROM yuxi.file_trees t WHERE t.id = p_tree_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    INSERT INTO yuxi.file_owners (uid) VALUES (v_tree.owner_uid) ON CONFLICT (uid) DO NOTHING;
    PERFORM 1 FROM yuxi.file_owners o WHERE o.uid = v_tree.owner_uid FOR UPDATE;
    WITH gone AS (
        DELETE FROM yuxi.files f
        WHERE f.tree_id = p_tree_id
          AND (f.path = p_path
               OR (p_prefix AND (p_path = '' OR left(f.path, length(p_path) + 1) = p_path || '/')))
        RETURNING f.bytes
    )
    SELECT count(*), coalesce(sum(g.bytes), 0) INTO v_files, v_bytes FROM gone g;
    UPDATE yuxi.file_trees t
    SET bytes = t.bytes - v_bytes, files = t.files - v_files,
        version = t.version + CASE WHEN v_files > 0 THEN 1 ELSE 0 END
    WHERE t.id = p_tree_id;
    UPDATE yuxi.file_owners o SET bytes = o.bytes - v_bytes WHERE o.uid = v_tree.owner_uid;
    RETURN v_files;
END;
$$;
COMMENT ON FUNCTION yuxi.file_delete(uuid, text, boolean) IS
    'Removes a file of a tree (p_prefix: and everything under that directory; '''' with p_prefix: the whole tree''s files); returns how many';

-- Drops a whole tree (a deleted knowledge base, conversation or user): its files now,
-- their contents with yuxi.file_gc.
CREATE FUNCTION yuxi.file_tree_drop(p_tree_id uuid) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_files integer;
BEGIN
    v_files := yuxi.file_delete(p_tree_id, '', true);
    DELETE FROM yuxi.file_trees t WHERE t.id = p_tree_id;
    RETURN v_files;
END;
$$;
COMMENT ON FUNCTION yuxi.file_tree_drop(uuid) IS
    'Removes a tree and its files (their contents go with yuxi.file_gc); returns how many files';

CREATE FUNCTION yuxi.file_info_of(f yuxi.files, p_chunks integer) RETURNS yuxi.file_info
LANGUAGE sql IMMUTABLE AS $$
    SELECT (f.path, f.bytes, f.sha256, f.media_type, f.modified_at, f.content_id, p_chunks,
            f.written_by_uid, f.written_by_run)::yuxi.file_info
$$;
COMMENT ON FUNCTION yuxi.file_info_of(yuxi.files, integer) IS 'Internal: a file row as yuxi.file_info';

-- The files of a tree, in path order: all of them, or those under p_prefix (a
-- directory, '' for the root).
CREATE FUNCTION yuxi.file_list(p_tree_id uuid, p_prefix text DEFAULT '')
RETURNS SETOF yuxi.file_info
LANGUAGE sql STABLE AS $$
    SELECT (yuxi.file_info_of(f, c.chunks)).*
    FROM yuxi.files f JOIN yuxi.file_contents c ON c.id = f.content_id
    WHERE f.tree_id = p_tree_id
      AND (p_prefix = '' OR left(f.path, length(p_prefix) + 1) = p_prefix || '/')
    ORDER BY f.path COLLATE "C"
$$;
COMMENT ON FUNCTION yuxi.file_list(uuid, text) IS
    'The files of a tree (under a directory, or all with ''''), in path order';

CREATE FUNCTION yuxi.file_get(p_tree_id uuid, p_path text) RETURNS SETOF yuxi.file_info
LANGUAGE sql STABLE AS $$
    SELECT (yuxi.file_info_of(f, c.chunks)).*
    FROM yuxi.files f JOIN yuxi.file_contents c ON c.id = f.content_id
    WHERE f.tree_id = p_tree_id AND f.path = p_path
$$;
COMMENT ON FUNCTION yuxi.file_get(uuid, text) IS 'The file at a path of a tree (no row when none)';

-- Chunks p_from to p_to of a content, in order (a reader streams a file a few at a time).
CREATE FUNCTION yuxi.file_chunks_read(p_content_id bigint, p_from integer, p_to integer)
RETURNS TABLE (n integer, data bytea)
LANGUAGE sql STABLE AS $$
    SELECT k.n, k.data FROM yuxi.file_chunks k
    WHERE k.content_id = p_content_id AND k.n BETWEEN p_from AND p_to
    ORDER BY k.n
$$;
COMMENT ON FUNCTION yuxi.file_chunks_read(bigint, integer, integer) IS
    'Chunks p_from..p_to of a content in order: chunk n holds bytes n * 1 MiB onwards';

-- Maintenance: removes contents no file refers to. An unfinished one only once its
-- writer's lease has run out; a finished one whose row no writer holds (yuxi.file_put
-- holds the one it links FOR SHARE, so SKIP LOCKED passes it over). Returns how many
-- contents and bytes went.
CREATE FUNCTION yuxi.file_gc(p_now timestamptz DEFAULT NULL, p_limit integer DEFAULT 1000)
RETURNS TABLE (contents integer, bytes bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
BEGIN
    WITH candidates AS (
        SELECT c.id FROM yuxi.file_contents c
        WHERE (c.sha256 IS NULL AND c.writer_expires_at < v_now)
           OR (c.sha256 IS NOT NULL AND NOT EXISTS (SELECT 1 FROM yuxi.files f WHERE f.content_id = c.id))
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ), gone AS (
        DELETE FROM yuxi.file_contents c USING candidates k
        WHERE c.id = k.id
          -- rechecked under the lock: a writer may have linked or extended it meanwhile
          AND ((c.sha256 IS NULL AND c.writer_expires_at < v_now)
               OR (c.sha256 IS NOT NULL AND NOT EXISTS (SELECT 1 FROM yuxi.files f WHERE f.content_id = c.id)))
        RETURNING c.bytes
    )
    SELECT count(*)::integer, coalesce(sum(g.bytes), 0)::bigint INTO contents, bytes FROM gone g;
    IF contents > 0 THEN
        PERFORM yuxi.maintenance_count('file_contents_removed', contents);
    END IF;
    RETURN NEXT;
END;
$$;
COMMENT ON FUNCTION yuxi.file_gc(timestamptz, integer) IS
    'Maintenance: removes file contents no file refers to (unfinished ones once their writer''s lease ran out); returns how many and their bytes';

-- The trees callers name by what they belong to.

-- The workdir tree of a live conversation of the user: its project's directory, or
-- threads/<id> (as yuxi.thread_workdir_shown shows it; a project whose directory lies
-- outside the workspace keeps its files under threads/<id>). Raises not_found (YN001).
CREATE FUNCTION yuxi.thread_file_tree(p_uid uuid, p_thread_id uuid) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
BEGIN
    SELECT * INTO v_conv FROM yuxi.conversations c
    WHERE c.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'thread % not found', p_thread_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN yuxi.file_tree(p_uid, 'workdir',
                          coalesce(yuxi.thread_workdir_shown(v_conv), 'threads/' || p_thread_id));
END;
$$;
COMMENT ON FUNCTION yuxi.thread_file_tree(uuid, uuid) IS
    'The file tree of a live conversation''s workdir (its project''s, or threads/<id>), created when missing. Raises not_found (YN001)';

CREATE FUNCTION yuxi.workspace_file_tree(p_uid uuid) RETURNS uuid
LANGUAGE sql AS $$
    SELECT yuxi.file_tree(p_uid, 'workspace', '')
$$;
COMMENT ON FUNCTION yuxi.workspace_file_tree(uuid) IS
    'The file tree of a user''s workspace (agents/AGENTS.md, USER.md, MEMORY.md, skills/), created when missing';

-- The trees a run of the user in the conversation works on, for the worker's cache:
-- {"workspace": {"id", "version"}, "workdir": {"id", "root", "version"}} (workdir null
-- without a live conversation of the user). Made when missing.
CREATE FUNCTION yuxi.run_file_trees(p_uid uuid, p_thread_id uuid) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
    v_id uuid;
    v_workspace yuxi.file_trees;
    v_workdir yuxi.file_trees;
BEGIN
    -- made first, read after: a statement does not see the rows it inserts
    v_id := yuxi.workspace_file_tree(p_uid);
    SELECT * INTO v_workspace FROM yuxi.file_trees t WHERE t.id = v_id;
    SELECT * INTO v_conv FROM yuxi.conversations c
    WHERE c.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active';
    IF FOUND THEN
        v_id := yuxi.thread_file_tree(p_uid, p_thread_id);
        SELECT * INTO v_workdir FROM yuxi.file_trees t WHERE t.id = v_id;
    END IF;
    RETURN jsonb_build_object(
        'workspace', jsonb_build_object('id', v_workspace.id, 'version', v_workspace.version),
        'workdir', CASE WHEN v_workdir.id IS NULL THEN NULL ELSE
            jsonb_build_object('id', v_workdir.id, 'root', v_workdir.root, 'version', v_workdir.version) END);
END;
$$;
COMMENT ON FUNCTION yuxi.run_file_trees(uuid, uuid) IS
    'Worker: the workspace and workdir trees a run of the user in the conversation works on, with their versions (made when missing)';

-- A knowledge base's tree (its documents' originals, by document id), its owner's.
-- Access is the caller's to check (the kb_* functions do). Raises not_found (YN001).
CREATE FUNCTION yuxi.kb_file_tree(p_kb_id uuid) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_owner uuid;
BEGIN
    SELECT k.uid INTO v_owner FROM yuxi.knowledge_bases k WHERE k.id = p_kb_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'knowledge base % not found', p_kb_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN yuxi.file_tree(v_owner, 'knowledge_base', p_kb_id::text);
END;
$$;
COMMENT ON FUNCTION yuxi.kb_file_tree(uuid) IS
    'The file tree of a knowledge base (its documents'' originals, named by document id), its owner''s, created when missing. Raises not_found (YN001)';

-- The claim returns the run's file trees too (a new column: the function is made again).
DROP FUNCTION yuxi.run_claim_execution(uuid, text, double precision, timestamptz);
CREATE FUNCTION yuxi.run_claim_execution(
    p_run_id uuid, p_worker text, p_lease_seconds double precision, p_now timestamptz DEFAULT NULL
) RETURNS TABLE (
    run_id               uuid,
    thread_id            uuid,
    uid                  uuid,
    agent_slug           text,
    request_id           text,
    run_type             text,
    created_by_run_id    uuid,
    input_message_id     bigint,
    input_payload        jsonb,
    lease_token          uuid,
    lease_expires_at     timestamptz,
    attempt_no           integer,
    started_at           timestamptz,
    manifest_fingerprint text,
    backend_id           text,
    agent_config         jsonb,
    agent_updated_at     timestamptz,
    project_id           uuid,
    workdir_path         text,
    input_text           text,
    identity_error       text,
    visible_subagents    text[],
    attachments          jsonb,
    model                jsonb,
    model_key_sealed     bytea,
    input_attachments    jsonb,
    catalog              jsonb,
    credit_hold          numeric,
    credit_error         text,
    file_trees           jsonb
)
LANGUAGE plpgsql AS $$
DECLARE
    v_claim yuxi.claimed_run;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    v_claim := yuxi.run_claim(p_run_id, p_worker, p_lease_seconds, p_now);
    RETURN QUERY
    SELECT v_claim.run_id, v_claim.thread_id, v_claim.uid, v_claim.agent_slug, v_claim.request_id,
           v_claim.run_type, v_claim.created_by_run_id, v_claim.input_message_id,
           v_claim.input_payload, v_claim.lease_token, v_claim.lease_expires_at,
           v_claim.attempt_no, v_claim.started_at, v_claim.manifest_fingerprint,
           i.backend_id, i.agent_config, i.agent_updated_at, i.project_id, i.workdir_path,
           i.input_text, i.identity_error, i.visible_subagents, i.attachments, i.model,
           i.model_key_sealed, i.input_attachments, i.catalog, f.hold, f.error,
           yuxi.run_file_trees(v_claim.uid, v_claim.thread_id)
    FROM yuxi.run_execution_input(p_run_id) i
    CROSS JOIN LATERAL yuxi.credit_freeze(p_run_id, v_claim.uid, i.model) f;
END;
$$;
COMMENT ON FUNCTION yuxi.run_claim_execution(uuid, text, double precision, timestamptz) IS
    'Worker: yuxi.run_claim and yuxi.run_execution_input in one call, with the run''s credit freeze (yuxi.credit_freeze: credit_hold, or credit_error when the balance cannot cover it) and its file trees (yuxi.run_file_trees), committed without waiting for the WAL flush (the manifest''s synchronous commit makes it durable). Raises as yuxi.run_claim';

-- Knowledge-base originals live in the file store: deleting a document removes its file,
-- deleting a knowledge base drops its tree, each in the same transaction as the rows.
COMMENT ON TABLE yuxi.kb_documents IS
    'Documents of a knowledge base, one per content (sha256 unique per knowledge base); the original is the file named by its id in the knowledge base''s file tree (yuxi.kb_file_tree). Status queued, processing, ready, failed';

CREATE OR REPLACE FUNCTION yuxi.kb_delete(p_uid uuid, p_kb_id uuid) RETURNS SETOF uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_kb yuxi.knowledge_bases;
BEGIN
    v_kb := yuxi.kb_access(p_uid, p_kb_id, true);
    PERFORM 1 FROM yuxi.knowledge_bases k WHERE k.id = p_kb_id FOR UPDATE;
    RETURN QUERY SELECT d.id FROM yuxi.kb_documents d WHERE d.kb_id = p_kb_id;
    DELETE FROM public.procrastinate_jobs j
    USING yuxi.kb_documents d
    WHERE d.kb_id = p_kb_id AND j.id = d.ingest_job_id AND j.status = 'todo';
    DELETE FROM yuxi.knowledge_bases k WHERE k.id = p_kb_id;  -- documents, chunks, shares cascade
    -- after the documents: an upload linking an original holds its document's row, so
    -- this sees the tree as that upload committed it
    PERFORM yuxi.file_tree_drop(t.id) FROM yuxi.file_trees t
    WHERE t.owner_uid = v_kb.uid AND t.kind = 'knowledge_base' AND t.root = p_kb_id::text;
END;
$$;
COMMENT ON FUNCTION yuxi.kb_delete(uuid, uuid) IS
    'API: deletes the caller''s knowledge base, its documents, chunks, waiting ingestion jobs and file tree (the originals); returns the documents'' ids. Raises not_found (YN001), forbidden (YA001)';

CREATE OR REPLACE FUNCTION yuxi.kb_document_delete(p_uid uuid, p_kb_id uuid, p_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_kb yuxi.knowledge_bases;
    v_job bigint;
BEGIN
    v_kb := yuxi.kb_access(p_uid, p_kb_id, true);
    DELETE FROM yuxi.kb_documents d WHERE d.id = p_id AND d.kb_id = p_kb_id
    RETURNING d.ingest_job_id INTO v_job;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'document % not found', p_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    DELETE FROM public.procrastinate_jobs j WHERE j.id = v_job AND j.status = 'todo';
    PERFORM yuxi.file_delete(t.id, p_id::text) FROM yuxi.file_trees t
    WHERE t.owner_uid = v_kb.uid AND t.kind = 'knowledge_base' AND t.root = p_kb_id::text;
END;
$$;
COMMENT ON FUNCTION yuxi.kb_document_delete(uuid, uuid, uuid) IS
    'API: deletes a document of the caller''s knowledge base, its chunks, its waiting ingestion job and its original file. Raises not_found (YN001), forbidden (YA001)';
