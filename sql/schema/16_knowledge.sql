-- yuxi: knowledge bases. Documents go in, are split into chunks by an ingestion job, and
-- come out of one search function that fuses full-text rank and vector similarity.
--
-- A knowledge base belongs to its owner; its share scope lets other users read it
-- (never write it): 'owner' (nobody else), 'selected' (the users in kb_shares) or 'all'.
-- Admins have no special access: a knowledge base is its owner's data.
--
-- Ingestion: the upload commits the document as `queued` and its procrastinate job
-- (yuxi.kb_document_ingest_job) in one transaction; a worker claims it
-- (yuxi.kb_document_claim: `processing`, attempt n), extracts, chunks and embeds it,
-- then writes every chunk (yuxi.kb_chunks_add) and makes it `ready`
-- (yuxi.kb_document_ready) in one transaction. So chunks are committed only with a
-- ready document: a worker killed mid-way leaves none (a guard trigger refuses chunks
-- for a document that is not being processed), and the stalled-ingestion scan
-- (yuxi.kb_document_redeliver_stalled) queues it again or, after three interruptions,
-- fails it.
--
-- Full text: PostgreSQL's parsers take a run of Chinese (or Japanese, Korean)
-- characters as one word, so yuxi.kb_search_text rewrites each such run as its
-- overlapping two-character grams before to_tsvector('simple', ...), and the query goes
-- through the same function (yuxi.kb_query). English words are kept as they are.
--
-- Vectors: an embedding is always stored as real[] (normalised to length 1 by the
-- writer), so a server without pgvector still searches by exact cosine (a dot product
-- in SQL: fine for small corpora). When the `vector` extension is installed in the
-- database (yuxi.kb_vector_setup installs it if the server has it and the role may),
-- yuxi.kb_vector_index_ensure builds one HNSW index per embedding dimension over
-- embedding::vector(n), and yuxi.kb_search uses it. yuxi.kb_vector_status says which.

-- ---------------------------------------------------------------------------------
-- Vocabulary

CREATE FUNCTION yuxi.kb_document_status_is_valid(p_status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_status IN ('queued', 'processing', 'ready', 'failed')
$$;
COMMENT ON FUNCTION yuxi.kb_document_status_is_valid(text) IS
    'True for a knowledge-base document status: queued, processing, ready, failed';

-- The text the full-text index sees: every run of CJK characters (kana, CJK ideographs,
-- hangul) becomes its overlapping two-character grams ("知识库" -> "知识 识库"), a run of
-- one character stays itself; everything else is kept.
CREATE FUNCTION yuxi.kb_search_text(p_text text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(string_agg(
        CASE WHEN m[1] ~ '^[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]'
             THEN CASE WHEN length(m[1]) = 1 THEN m[1]
                       ELSE (SELECT string_agg(substr(m[1], i, 2), ' ' ORDER BY i)
                             FROM generate_series(1, length(m[1]) - 1) AS i) END
             ELSE m[1] END, ' '), '')
    FROM regexp_matches(p_text,
        '([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+|[^\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+)',
        'g') AS m
$$;
COMMENT ON FUNCTION yuxi.kb_search_text(text) IS
    'The text kb_chunks.search indexes: runs of CJK characters become overlapping two-character grams, the rest is kept';

-- The query of a search: any of its words (and CJK grams), ranked by how many match;
-- NULL when it has none.
CREATE FUNCTION yuxi.kb_query(p_query text) RETURNS tsquery
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(string_agg(
        '''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''', ' | ')::tsquery)
    FROM unnest(tsvector_to_array(to_tsvector('simple', yuxi.kb_search_text(p_query)))) AS lexeme
$$;
COMMENT ON FUNCTION yuxi.kb_query(text) IS
    'The tsquery of a search text: any of its words or CJK two-character grams (OR), as kb_chunks.search indexes them; NULL without any';

-- ---------------------------------------------------------------------------------
-- Tables

CREATE TABLE yuxi.knowledge_bases (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    uid              uuid NOT NULL REFERENCES yuxi.users (id) ON DELETE CASCADE,
    slug             text NOT NULL CHECK (slug ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    name             text NOT NULL CHECK (length(btrim(name)) BETWEEN 1 AND 200),
    description      text NOT NULL DEFAULT '' CHECK (length(description) <= 4000),
    embedding_model  text CHECK (embedding_model ~ '^[a-z0-9_]+:\S+$'),
    share_scope      text NOT NULL DEFAULT 'owner' CHECK (share_scope IN ('owner', 'selected', 'all')),
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (uid, slug)
);
COMMENT ON TABLE yuxi.knowledge_bases IS
    'Knowledge bases: an owner, a slug unique per owner, an embedding model or none (text search only), who else may read it (share_scope owner, selected, all)';
COMMENT ON COLUMN yuxi.knowledge_bases.embedding_model IS
    'provider:model of the embeddings of its chunks (e.g. openai:text-embedding-3-small), or NULL; fixed at creation';

CREATE TABLE yuxi.kb_shares (
    kb_id  uuid NOT NULL REFERENCES yuxi.knowledge_bases (id) ON DELETE CASCADE,
    uid    uuid NOT NULL REFERENCES yuxi.users (id) ON DELETE CASCADE,
    PRIMARY KEY (kb_id, uid)
);
CREATE INDEX kb_shares_uid_idx ON yuxi.kb_shares (uid);
COMMENT ON TABLE yuxi.kb_shares IS
    'The users who may read a knowledge base whose share_scope is selected';

CREATE TABLE yuxi.kb_documents (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    kb_id          uuid NOT NULL REFERENCES yuxi.knowledge_bases (id) ON DELETE CASCADE,
    uid            uuid REFERENCES yuxi.users (id) ON DELETE SET NULL,
    filename       text NOT NULL CHECK (yuxi.attachment_name_is_valid(filename)),
    media_type     text NOT NULL CHECK (media_type ~ '^[a-z0-9.+-]+/[a-z0-9.+-]+$'),
    bytes          bigint NOT NULL CHECK (bytes >= 0),
    sha256         text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    status         text NOT NULL DEFAULT 'queued' CHECK (yuxi.kb_document_status_is_valid(status)),
    error          text,
    chunks         integer NOT NULL DEFAULT 0 CHECK (chunks >= 0),
    attempts       integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    ingest_job_id  bigint,
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    ready_at       timestamptz,
    UNIQUE (kb_id, sha256),
    CHECK ((status = 'ready') = (ready_at IS NOT NULL)),
    CHECK (status = 'failed' OR error IS NULL)
);
CREATE INDEX kb_documents_kb_idx ON yuxi.kb_documents (kb_id, created_at);
CREATE INDEX kb_documents_pending_idx ON yuxi.kb_documents (created_at)
    WHERE status IN ('queued', 'processing');
COMMENT ON TABLE yuxi.kb_documents IS
    'Documents of a knowledge base, one per content (sha256 unique per knowledge base); the original is the file named by its id in the knowledge base''s file tree (yuxi.kb_file_tree). Status queued, processing, ready, failed';
COMMENT ON COLUMN yuxi.kb_documents.attempts IS
    'Ingestion attempts so far; the attempt that finishes must be the latest (yuxi.kb_document_ready)';
COMMENT ON COLUMN yuxi.kb_documents.ingest_job_id IS
    'The procrastinate job (queue yuxi_knowledge) that ingests it, inserted with it';

CREATE TABLE yuxi.kb_chunks (
    document_id  uuid NOT NULL REFERENCES yuxi.kb_documents (id) ON DELETE CASCADE,
    seq          integer NOT NULL CHECK (seq >= 0),
    kb_id        uuid NOT NULL,
    text         text NOT NULL,
    tokens       integer NOT NULL CHECK (tokens >= 0),
    embedding    real[],
    search       tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, yuxi.kb_search_text(text))) STORED,
    PRIMARY KEY (document_id, seq)
);
CREATE INDEX kb_chunks_search_idx ON yuxi.kb_chunks USING gin (search);
CREATE INDEX kb_chunks_kb_idx ON yuxi.kb_chunks (kb_id);
COMMENT ON TABLE yuxi.kb_chunks IS
    'The searchable pieces of ready documents: text, a token estimate, the CJK-aware tsvector, an optional embedding (unit length). Written only with the ready document (yuxi.kb_document_ready)';
COMMENT ON COLUMN yuxi.kb_chunks.kb_id IS
    'The document''s knowledge base, copied so that a search filters chunks without a join';
COMMENT ON COLUMN yuxi.kb_chunks.embedding IS
    'The embedding by the knowledge base''s model, normalised to length 1 (cosine = dot product), or NULL';

-- Chunks are written only for a document being processed, in the transaction that
-- makes it ready: none is ever committed for a queued, failed or half-ingested one.
CREATE FUNCTION yuxi.kb_chunks_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM new_chunks c
               LEFT JOIN yuxi.kb_documents d ON d.id = c.document_id
               WHERE d.status IS DISTINCT FROM 'processing' OR d.kb_id <> c.kb_id) THEN
        RAISE EXCEPTION 'chunks are written only for a document being processed, in its knowledge base'
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION yuxi.kb_chunks_guard() IS
    'Trigger: refuses chunks of a document that is not processing, or filed under another knowledge base';
CREATE TRIGGER kb_chunks_guard AFTER INSERT ON yuxi.kb_chunks
    REFERENCING NEW TABLE AS new_chunks FOR EACH STATEMENT EXECUTE FUNCTION yuxi.kb_chunks_guard();

-- ---------------------------------------------------------------------------------
-- Vectors

-- Whether vector indexing is on: the `vector` extension is installed in this database.
CREATE FUNCTION yuxi.kb_vector_status()
RETURNS TABLE (vector_indexing boolean, pgvector_version text, detail text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_installed text;
    v_available text;
BEGIN
    SELECT e.extversion INTO v_installed FROM pg_extension e WHERE e.extname = 'vector';
    IF v_installed IS NOT NULL THEN
        RETURN QUERY SELECT true, v_installed,
            format('on: pgvector %s, an HNSW index per embedding dimension', v_installed);
        RETURN;
    END IF;
    SELECT a.default_version INTO v_available FROM pg_available_extensions a WHERE a.name = 'vector';
    IF v_available IS NULL THEN
        RETURN QUERY SELECT false, NULL::text,
            'off: the server has no pgvector; vector search is an exact cosine scan';
    ELSE
        RETURN QUERY SELECT false, NULL::text,
            format('off: pgvector %s is on the server but not installed in this database (CREATE EXTENSION vector, as a superuser, turns it on); vector search is an exact cosine scan', v_available);
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.kb_vector_status() IS
    'Whether vector search uses pgvector''s HNSW indexes (the vector extension is installed) or an exact cosine scan over real[], and why';

-- Installs pgvector when the server has it and this role may; otherwise leaves vector
-- search to the exact scan. Run by the migration and by every `yuxi db migrate`.
CREATE FUNCTION yuxi.kb_vector_setup() RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN
        RETURN true;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        RETURN false;
    END IF;
    BEGIN
        CREATE EXTENSION IF NOT EXISTS vector;
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE NOTICE 'pgvector is on the server but this role may not install it: vector search is an exact scan';
        RETURN false;
    END;
    RETURN true;
END;
$$;
COMMENT ON FUNCTION yuxi.kb_vector_setup() IS
    'Installs the vector extension when the server has it and the role may; true when vector indexing is on';

-- The HNSW index of embeddings of p_dims dimensions, built when missing (pgvector
-- indexes at most 2000 dimensions; larger embeddings are searched exactly). Called by
-- the ingesting worker in a transaction of its own before it writes chunks of that
-- size. Returns the index's name, or NULL without pgvector or past 2000 dimensions.
CREATE FUNCTION yuxi.kb_vector_index_ensure(p_dims integer) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_schema text;
    v_name text := 'kb_chunks_hnsw_' || p_dims;
BEGIN
    IF p_dims IS NULL OR p_dims < 1 THEN
        RAISE EXCEPTION 'dimensions must be positive' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    SELECT n.nspname INTO v_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'vector';
    IF v_schema IS NULL OR p_dims > 2000 THEN
        RETURN NULL;
    END IF;
    IF to_regclass('yuxi.' || v_name) IS NULL THEN
        -- one builder at a time; the others find it built
        PERFORM pg_advisory_xact_lock(7420117002000 + p_dims);
        IF to_regclass('yuxi.' || v_name) IS NULL THEN
            EXECUTE format(
                'CREATE INDEX %I ON yuxi.kb_chunks USING hnsw ((embedding::%I.vector(%s)) %I.vector_cosine_ops) WHERE cardinality(embedding) = %s',
                v_name, v_schema, p_dims, v_schema, p_dims);
        END IF;
    END IF;
    RETURN v_name;
END;
$$;
COMMENT ON FUNCTION yuxi.kb_vector_index_ensure(integer) IS
    'Worker: builds the HNSW index over embeddings of p_dims dimensions when pgvector is installed and it is missing; returns its name or NULL. Raises invalid_input (YV001)';

-- ---------------------------------------------------------------------------------
-- Access

-- Whether the live user p_uid may read the knowledge base: their own, or shared with
-- them (scope all, or selected and listed). NULL (an operator) reads every one.
CREATE FUNCTION yuxi.kb_may_read(p_kb yuxi.knowledge_bases, p_uid uuid) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT p_uid IS NULL
        OR (EXISTS (SELECT 1 FROM yuxi.users u WHERE u.id = p_uid AND u.deleted_at IS NULL)
            AND (p_kb.uid = p_uid
                 OR p_kb.share_scope = 'all'
                 OR (p_kb.share_scope = 'selected'
                     AND EXISTS (SELECT 1 FROM yuxi.kb_shares s WHERE s.kb_id = p_kb.id AND s.uid = p_uid))))
$$;
COMMENT ON FUNCTION yuxi.kb_may_read(yuxi.knowledge_bases, uuid) IS
    'True when a live user may read the knowledge base (owned, or shared with them); always for NULL (an operator)';

CREATE FUNCTION yuxi.kb_readable(p_uid uuid) RETURNS SETOF uuid
LANGUAGE sql STABLE AS $$
    SELECT k.id FROM yuxi.knowledge_bases k WHERE yuxi.kb_may_read(k, p_uid) ORDER BY k.id
$$;
COMMENT ON FUNCTION yuxi.kb_readable(uuid) IS
    'The ids of the knowledge bases a live user may read (owned or shared with them); every one for NULL (an operator)';

-- The knowledge base, when p_uid may read it and, with p_write, owns it. Not readable:
-- not_found (another user's knowledge base does not exist for the caller); readable
-- but not owned and p_write: forbidden. Locks nothing: writers lock the row themselves.
CREATE FUNCTION yuxi.kb_access(p_uid uuid, p_kb_id uuid, p_write boolean DEFAULT false)
RETURNS yuxi.knowledge_bases
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_kb yuxi.knowledge_bases;
BEGIN
    SELECT * INTO v_kb FROM yuxi.knowledge_bases k WHERE k.id = p_kb_id;
    IF NOT FOUND OR NOT yuxi.kb_may_read(v_kb, p_uid) THEN
        RAISE EXCEPTION 'knowledge base % not found', p_kb_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    IF p_write AND p_uid IS NOT NULL AND v_kb.uid <> p_uid THEN
        RAISE EXCEPTION 'knowledge base % is shared with you read-only', p_kb_id
            USING ERRCODE = 'YA001', HINT = 'forbidden';
    END IF;
    RETURN v_kb;
END;
$$;
COMMENT ON FUNCTION yuxi.kb_access(uuid, uuid, boolean) IS
    'Internal: a knowledge base the user may read (and, with p_write, owns). Raises not_found (YN001), forbidden (YA001)';

-- ---------------------------------------------------------------------------------
-- Knowledge bases

CREATE TYPE yuxi.kb_info AS (
    id               uuid,
    uid              uuid,
    owner_name       text,
    slug             text,
    name             text,
    description      text,
    embedding_model  text,
    share_scope      text,
    shared_with      uuid[],
    documents        bigint,
    ready_documents  bigint,
    chunks           bigint,
    created_at       timestamptz,
    updated_at       timestamptz
);
COMMENT ON TYPE yuxi.kb_info IS
    'A knowledge base as the API shows it: owner, share scope and live users shared with, document and chunk counts';

CREATE FUNCTION yuxi.kb_info_of(p_kb yuxi.knowledge_bases) RETURNS yuxi.kb_info
LANGUAGE sql STABLE AS $$
    SELECT p_kb.id, p_kb.uid, (SELECT u.name FROM yuxi.users u WHERE u.id = p_kb.uid),
           p_kb.slug, p_kb.name, p_kb.description, p_kb.embedding_model, p_kb.share_scope,
           coalesce((SELECT array_agg(s.uid ORDER BY s.uid) FROM yuxi.kb_shares s
                     JOIN yuxi.users u ON u.id = s.uid AND u.deleted_at IS NULL
                     WHERE s.kb_id = p_kb.id), '{}'),
           (SELECT count(*) FROM yuxi.kb_documents d WHERE d.kb_id = p_kb.id),
           (SELECT count(*) FROM yuxi.kb_documents d WHERE d.kb_id = p_kb.id AND d.status = 'ready'),
           (SELECT coalesce(sum(d.chunks), 0)::bigint FROM yuxi.kb_documents d
            WHERE d.kb_id = p_kb.id AND d.status = 'ready'),
           p_kb.created_at, p_kb.updated_at
$$;
COMMENT ON FUNCTION yuxi.kb_info_of(yuxi.knowledge_bases) IS
    'Internal: the kb_info view of a knowledge base row';

-- A slug from a name: lower-case ASCII letters and digits joined by dashes, or "kb"
-- when nothing of the name is ASCII.
CREATE FUNCTION yuxi.kb_slug_of(p_name text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(nullif(left(btrim(regexp_replace(lower(coalesce(p_name, '')), '[^a-z0-9]+', '-', 'g'), '-'), 50), ''), 'kb')
$$;
COMMENT ON FUNCTION yuxi.kb_slug_of(text) IS
    'A slug from a name: lower-case ASCII words joined by dashes, or kb';

-- Replaces the users a knowledge base is shared with (live users only, never its owner).
CREATE FUNCTION yuxi.kb_share_set(p_kb yuxi.knowledge_bases, p_shared_with uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM yuxi.kb_shares WHERE kb_id = p_kb.id;
    IF p_kb.share_scope <> 'selected' THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(coalesce(p_shared_with, '{}')) AS w(uid)
               WHERE NOT EXISTS (SELECT 1 FROM yuxi.users u WHERE u.id = w.uid AND u.deleted_at IS NULL)) THEN
        RAISE EXCEPTION 'shared_with names a user that does not exist' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    INSERT INTO yuxi.kb_shares (kb_id, uid)
    SELECT DISTINCT p_kb.id, w.uid FROM unnest(coalesce(p_shared_with, '{}')) AS w(uid)
    WHERE w.uid <> p_kb.uid;
END;
$$;
COMMENT ON FUNCTION yuxi.kb_share_set(yuxi.knowledge_bases, uuid[]) IS
    'Internal: replaces the users a selected knowledge base is shared with. Raises invalid_input (YV001)';

-- Creates a knowledge base owned by p_uid. The slug is p_slug, or one made from the
-- name (with -2, -3, ... when the owner has it already).
CREATE FUNCTION yuxi.kb_create(
    p_uid uuid, p_name text, p_description text DEFAULT '', p_embedding_model text DEFAULT NULL,
    p_share_scope text DEFAULT 'owner', p_shared_with uuid[] DEFAULT '{}', p_slug text DEFAULT NULL
) RETURNS yuxi.kb_info
LANGUAGE plpgsql AS $$
DECLARE
    v_kb yuxi.knowledge_bases;
    v_base text := coalesce(p_slug, yuxi.kb_slug_of(p_name));
    v_slug text := v_base;
    v_n integer := 1;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM yuxi.users u WHERE u.id = p_uid AND u.deleted_at IS NULL) THEN
        RAISE EXCEPTION 'user % not found', p_uid USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    IF p_name IS NULL OR length(btrim(p_name)) = 0 OR length(p_name) > 200 THEN
        RAISE EXCEPTION 'a knowledge base needs a name of 1 to 200 characters' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF coalesce(p_share_scope, 'owner') NOT IN ('owner', 'selected', 'all') THEN
        RAISE EXCEPTION 'share_scope is one of owner, selected, all' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_slug IS NOT NULL AND p_slug !~ '^[a-z0-9][a-z0-9_-]{0,62}$' THEN
        RAISE EXCEPTION 'slug % must be lower-case letters, digits, - and _ (at most 63)', p_slug
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    -- the owner's row serialises their creations, so a free slug stays free
    PERFORM 1 FROM yuxi.users u WHERE u.id = p_uid FOR NO KEY UPDATE;
    WHILE EXISTS (SELECT 1 FROM yuxi.knowledge_bases k WHERE k.uid = p_uid AND k.slug = v_slug) LOOP
        IF p_slug IS NOT NULL THEN
            RAISE EXCEPTION 'you have a knowledge base %', p_slug USING ERRCODE = 'YK001', HINT = 'knowledge_base_exists';
        END IF;
        v_n := v_n + 1;
        v_slug := v_base || '-' || v_n;
    END LOOP;
    INSERT INTO yuxi.knowledge_bases (uid, slug, name, description, embedding_model, share_scope)
    VALUES (p_uid, v_slug, btrim(p_name), coalesce(p_description, ''), nullif(p_embedding_model, ''),
            coalesce(p_share_scope, 'owner'))
    RETURNING * INTO v_kb;
    PERFORM yuxi.kb_share_set(v_kb, p_shared_with);
    RETURN yuxi.kb_info_of(v_kb);
END;
$$;
COMMENT ON FUNCTION yuxi.kb_create(uuid, text, text, text, text, uuid[], text) IS
    'API: creates a knowledge base owned by a live user (slug given, or made from the name). Raises not_found (YN001), invalid_input (YV001), knowledge_base_exists (YK001)';

-- Changes a knowledge base: each argument left NULL keeps its value; p_shared_with
-- replaces the shares. The embedding model is fixed at creation (its chunks were
-- embedded by it).
CREATE FUNCTION yuxi.kb_update(
    p_uid uuid, p_kb_id uuid, p_name text DEFAULT NULL, p_description text DEFAULT NULL,
    p_share_scope text DEFAULT NULL, p_shared_with uuid[] DEFAULT NULL
) RETURNS yuxi.kb_info
LANGUAGE plpgsql AS $$
DECLARE
    v_kb yuxi.knowledge_bases := yuxi.kb_access(p_uid, p_kb_id, true);
BEGIN
    PERFORM 1 FROM yuxi.knowledge_bases k WHERE k.id = p_kb_id FOR UPDATE;
    IF p_name IS NOT NULL AND (length(btrim(p_name)) = 0 OR length(p_name) > 200) THEN
        RAISE EXCEPTION 'a knowledge base needs a name of 1 to 200 characters' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_share_scope IS NOT NULL AND p_share_scope NOT IN ('owner', 'selected', 'all') THEN
        RAISE EXCEPTION 'share_scope is one of owner, selected, all' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    UPDATE yuxi.knowledge_bases k
    SET name = coalesce(btrim(p_name), k.name),
        description = coalesce(p_description, k.description),
        share_scope = coalesce(p_share_scope, k.share_scope),
        updated_at = clock_timestamp()
    WHERE k.id = p_kb_id
    RETURNING * INTO v_kb;
    IF p_shared_with IS NOT NULL OR p_share_scope IS NOT NULL THEN
        PERFORM yuxi.kb_share_set(v_kb, coalesce(p_shared_with,
            (SELECT array_agg(s.uid) FROM yuxi.kb_shares s WHERE s.kb_id = p_kb_id)));
    END IF;
    RETURN yuxi.kb_info_of(v_kb);
END;
$$;
COMMENT ON FUNCTION yuxi.kb_update(uuid, uuid, text, text, text, uuid[]) IS
    'API: changes the name, description or sharing of the caller''s knowledge base. Raises not_found (YN001), forbidden (YA001), invalid_input (YV001)';

CREATE FUNCTION yuxi.kb_get(p_uid uuid, p_kb_id uuid) RETURNS yuxi.kb_info
LANGUAGE sql AS $$
    SELECT yuxi.kb_info_of(yuxi.kb_access(p_uid, p_kb_id, false))
$$;
COMMENT ON FUNCTION yuxi.kb_get(uuid, uuid) IS
    'API: a knowledge base the user may read. Raises not_found (YN001)';

CREATE FUNCTION yuxi.kb_list(p_uid uuid) RETURNS SETOF yuxi.kb_info
LANGUAGE sql STABLE AS $$
    SELECT i.* FROM yuxi.knowledge_bases k, LATERAL yuxi.kb_info_of(k) AS i
    WHERE yuxi.kb_may_read(k, p_uid)
    ORDER BY k.uid IS DISTINCT FROM p_uid, k.name, k.id
$$;
COMMENT ON FUNCTION yuxi.kb_list(uuid) IS
    'API: the knowledge bases a user may read, their own first, by name';

-- Deletes a knowledge base with its documents and chunks and its file tree (the
-- documents' originals), in one transaction; returns the ids of its documents.
CREATE FUNCTION yuxi.kb_delete(p_uid uuid, p_kb_id uuid) RETURNS SETOF uuid
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

-- ---------------------------------------------------------------------------------
-- Documents

-- Inserts the procrastinate job that ingests a document, in the caller's transaction
-- (a waiting one is reused); p_delay_seconds postpones it (a retry).
CREATE FUNCTION yuxi.kb_document_ingest_job(p_document_id uuid, p_delay_seconds double precision DEFAULT 0)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_job_id bigint;
BEGIN
    SELECT id INTO v_job_id FROM public.procrastinate_jobs
    WHERE queueing_lock = 'kb_document:' || p_document_id::text AND status = 'todo';
    IF FOUND THEN
        RETURN v_job_id;
    END IF;
    RETURN (public.procrastinate_defer_jobs_v1(ARRAY[
        ROW('yuxi_knowledge', 'ingest_document', 0, NULL, 'kb_document:' || p_document_id::text,
            jsonb_build_object('document_id', p_document_id::text),
            CASE WHEN coalesce(p_delay_seconds, 0) > 0
                 THEN clock_timestamp() + make_interval(secs => p_delay_seconds) END
        )::public.procrastinate_job_to_defer_v1
    ]))[1];
END;
$$;
COMMENT ON FUNCTION yuxi.kb_document_ingest_job(uuid, double precision) IS
    'Internal: the procrastinate job that ingests a document, inserted in the caller''s transaction (a waiting one is reused)';

CREATE TYPE yuxi.kb_document_info AS (
    id          uuid,
    kb_id       uuid,
    filename    text,
    media_type  text,
    bytes       bigint,
    sha256      text,
    status      text,
    chunks      integer,
    error       text,
    attempts    integer,
    created_at  timestamptz,
    updated_at  timestamptz,
    ready_at    timestamptz,
    created     boolean
);
COMMENT ON TYPE yuxi.kb_document_info IS
    'A knowledge-base document as the API shows it; created is false when an upload found the same content there';

CREATE FUNCTION yuxi.kb_document_info_of(p_doc yuxi.kb_documents, p_created boolean DEFAULT false)
RETURNS yuxi.kb_document_info
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_doc.id, p_doc.kb_id, p_doc.filename, p_doc.media_type, p_doc.bytes, p_doc.sha256,
           p_doc.status, p_doc.chunks, p_doc.error, p_doc.attempts, p_doc.created_at,
           p_doc.updated_at, p_doc.ready_at, p_created
$$;
COMMENT ON FUNCTION yuxi.kb_document_info_of(yuxi.kb_documents, boolean) IS
    'Internal: the kb_document_info view of a document row';

-- Records an uploaded document as queued, with its ingestion job, in the caller's
-- transaction (the caller links its original at path <id> of the knowledge base's file
-- tree, yuxi.kb_file_tree, before committing).
-- The same content again returns the document already there (created false); a failed
-- one is queued again. Two uploads of the same bytes at once make one document: the
-- second waits on the unique (kb_id, sha256) and then finds the first.
CREATE FUNCTION yuxi.kb_document_add(
    p_uid uuid, p_kb_id uuid, p_filename text, p_bytes bigint, p_sha256 text, p_media_type text
) RETURNS yuxi.kb_document_info
LANGUAGE plpgsql AS $$
DECLARE
    v_doc yuxi.kb_documents;
BEGIN
    -- no lock of the knowledge base: the document's foreign key holds it against a
    -- concurrent delete, and uploads to one knowledge base do not wait for each other
    PERFORM yuxi.kb_access(p_uid, p_kb_id, true);
    IF NOT coalesce(yuxi.attachment_name_is_valid(p_filename), false) THEN
        RAISE EXCEPTION 'invalid document name %', p_filename USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    INSERT INTO yuxi.kb_documents (kb_id, uid, filename, media_type, bytes, sha256)
    VALUES (p_kb_id, p_uid, p_filename, p_media_type, p_bytes, p_sha256)
    ON CONFLICT (kb_id, sha256) DO NOTHING
    RETURNING * INTO v_doc;
    IF FOUND THEN
        UPDATE yuxi.kb_documents d SET ingest_job_id = yuxi.kb_document_ingest_job(v_doc.id)
        WHERE d.id = v_doc.id RETURNING * INTO v_doc;
        RETURN yuxi.kb_document_info_of(v_doc, true);
    END IF;
    SELECT * INTO v_doc FROM yuxi.kb_documents d
    WHERE d.kb_id = p_kb_id AND d.sha256 = p_sha256 FOR UPDATE;
    IF v_doc.status = 'failed' THEN
        UPDATE yuxi.kb_documents d
        SET status = 'queued', error = NULL, attempts = 0, updated_at = clock_timestamp(),
            ingest_job_id = yuxi.kb_document_ingest_job(v_doc.id)
        WHERE d.id = v_doc.id RETURNING * INTO v_doc;
    END IF;
    RETURN yuxi.kb_document_info_of(v_doc, false);
END;
$$;
COMMENT ON FUNCTION yuxi.kb_document_add(uuid, uuid, text, bigint, text, text) IS
    'API: records an uploaded document as queued with its ingestion job (the same content returns the existing document, created false; a failed one is queued again). Raises not_found (YN001), forbidden (YA001), invalid_input (YV001)';

CREATE FUNCTION yuxi.kb_document_list(p_uid uuid, p_kb_id uuid) RETURNS SETOF yuxi.kb_document_info
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM yuxi.kb_access(p_uid, p_kb_id, false);
    RETURN QUERY SELECT i.* FROM yuxi.kb_documents d, LATERAL yuxi.kb_document_info_of(d) AS i
    WHERE d.kb_id = p_kb_id ORDER BY d.created_at, d.id;
END;
$$;
COMMENT ON FUNCTION yuxi.kb_document_list(uuid, uuid) IS
    'API: the documents of a knowledge base the user may read, oldest first. Raises not_found (YN001)';

CREATE FUNCTION yuxi.kb_document_get(p_uid uuid, p_kb_id uuid, p_id uuid) RETURNS yuxi.kb_document_info
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_doc yuxi.kb_documents;
BEGIN
    PERFORM yuxi.kb_access(p_uid, p_kb_id, false);
    SELECT * INTO v_doc FROM yuxi.kb_documents d WHERE d.id = p_id AND d.kb_id = p_kb_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'document % not found', p_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN yuxi.kb_document_info_of(v_doc);
END;
$$;
COMMENT ON FUNCTION yuxi.kb_document_get(uuid, uuid, uuid) IS
    'API: one document of a knowledge base the user may read. Raises not_found (YN001)';

-- Deletes a document with its chunks, its waiting ingestion job and its original (the
-- file <id> of the knowledge base's tree) in one transaction.
CREATE FUNCTION yuxi.kb_document_delete(p_uid uuid, p_kb_id uuid, p_id uuid) RETURNS void
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

-- ---------------------------------------------------------------------------------
-- Ingestion (the worker)

CREATE TYPE yuxi.kb_ingest_task AS (
    document_id      uuid,
    kb_id            uuid,
    filename         text,
    media_type       text,
    sha256           text,
    attempt          integer,
    embedding_model  text
);
COMMENT ON TYPE yuxi.kb_ingest_task IS
    'What the ingesting worker needs of a claimed document: the file''s identity, the attempt it holds, the embedding model';

-- Claims a queued (or interrupted, still processing) document for a new attempt; no
-- row when it is ready, failed or gone (a duplicate delivery does nothing).
CREATE FUNCTION yuxi.kb_document_claim(p_id uuid) RETURNS SETOF yuxi.kb_ingest_task
LANGUAGE plpgsql AS $$
DECLARE
    v_doc yuxi.kb_documents;
BEGIN
    UPDATE yuxi.kb_documents d
    SET status = 'processing', attempts = d.attempts + 1, updated_at = clock_timestamp()
    WHERE d.id = p_id AND d.status IN ('queued', 'processing')
    RETURNING * INTO v_doc;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT v_doc.id, v_doc.kb_id, v_doc.filename, v_doc.media_type, v_doc.sha256,
                        v_doc.attempts, k.embedding_model
                 FROM yuxi.knowledge_bases k WHERE k.id = v_doc.kb_id;
END;
$$;
COMMENT ON FUNCTION yuxi.kb_document_claim(uuid) IS
    'Worker: starts a new ingestion attempt of a queued or interrupted document; no row when there is nothing to ingest';

-- The document, locked, when p_attempt is still its latest attempt and it is being
-- processed; otherwise the attempt was superseded (or the document deleted).
CREATE FUNCTION yuxi.kb_document_held(p_id uuid, p_attempt integer) RETURNS yuxi.kb_documents
LANGUAGE plpgsql AS $$
DECLARE
    v_doc yuxi.kb_documents;
BEGIN
    SELECT * INTO v_doc FROM yuxi.kb_documents d WHERE d.id = p_id FOR UPDATE;
    IF NOT FOUND OR v_doc.status <> 'processing' OR v_doc.attempts <> p_attempt THEN
        RAISE EXCEPTION 'ingestion attempt % of document % is not the current one', p_attempt, p_id
            USING ERRCODE = 'YL001', HINT = 'lease_lost';
    END IF;
    RETURN v_doc;
END;
$$;
COMMENT ON FUNCTION yuxi.kb_document_held(uuid, integer) IS
    'Internal: a document locked for its current ingestion attempt. Raises lease_lost (YL001) for a superseded attempt or a deleted document';

-- Adds chunks of a document under its current attempt: p_texts[i] is chunk
-- p_first_seq + i - 1; p_embeddings, when given, holds p_dims values per chunk, one
-- after another. Called any number of times in the transaction that ends with
-- yuxi.kb_document_ready.
CREATE FUNCTION yuxi.kb_chunks_add(
    p_id uuid, p_attempt integer, p_first_seq integer, p_texts text[], p_tokens integer[],
    p_embeddings real[] DEFAULT NULL, p_dims integer DEFAULT NULL
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_doc yuxi.kb_documents := yuxi.kb_document_held(p_id, p_attempt);
    v_n integer := coalesce(cardinality(p_texts), 0);
BEGIN
    IF coalesce(cardinality(p_tokens), 0) <> v_n THEN
        RAISE EXCEPTION 'one token count per chunk' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_embeddings IS NOT NULL AND (p_dims IS NULL OR p_dims < 1 OR cardinality(p_embeddings) <> v_n * p_dims) THEN
        RAISE EXCEPTION 'embeddings hold p_dims values per chunk' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    INSERT INTO yuxi.kb_chunks (document_id, seq, kb_id, text, tokens, embedding)
    SELECT p_id, p_first_seq + i - 1, v_doc.kb_id, p_texts[i], p_tokens[i],
           CASE WHEN p_embeddings IS NOT NULL THEN p_embeddings[(i - 1) * p_dims + 1 : i * p_dims] END
    FROM generate_series(1, v_n) AS i;
    RETURN v_n;
END;
$$;
COMMENT ON FUNCTION yuxi.kb_chunks_add(uuid, integer, integer, text[], integer[], real[], integer) IS
    'Worker: adds chunks (text, token estimate, optional flattened embeddings of p_dims) of a document under its current attempt. Raises lease_lost (YL001), invalid_input (YV001)';

-- Makes a document ready with the chunks its current attempt added in this
-- transaction: they become searchable when this commits, all at once.
CREATE FUNCTION yuxi.kb_document_ready(p_id uuid, p_attempt integer) RETURNS yuxi.kb_document_info
LANGUAGE plpgsql AS $$
DECLARE
    v_doc yuxi.kb_documents := yuxi.kb_document_held(p_id, p_attempt);
BEGIN
    UPDATE yuxi.kb_documents d
    SET status = 'ready', error = NULL, ready_at = clock_timestamp(), updated_at = clock_timestamp(),
        chunks = (SELECT count(*) FROM yuxi.kb_chunks c WHERE c.document_id = p_id)
    WHERE d.id = p_id RETURNING * INTO v_doc;
    RETURN yuxi.kb_document_info_of(v_doc);
END;
$$;
COMMENT ON FUNCTION yuxi.kb_document_ready(uuid, integer) IS
    'Worker: makes a document ready with the chunks added in this transaction. Raises lease_lost (YL001)';

-- Ends an attempt that failed: with p_retry and fewer than p_max_attempts so far the
-- document is queued again (a new job in p_delay_seconds); otherwise it is failed with
-- p_error. Its chunks (none can be committed) are removed either way.
CREATE FUNCTION yuxi.kb_document_fail(
    p_id uuid, p_attempt integer, p_error text, p_retry boolean DEFAULT false,
    p_max_attempts integer DEFAULT 3, p_delay_seconds double precision DEFAULT 5
) RETURNS yuxi.kb_document_info
LANGUAGE plpgsql AS $$
DECLARE
    v_doc yuxi.kb_documents := yuxi.kb_document_held(p_id, p_attempt);
BEGIN
    DELETE FROM yuxi.kb_chunks c WHERE c.document_id = p_id;
    IF p_retry AND v_doc.attempts < p_max_attempts THEN
        UPDATE yuxi.kb_documents d
        SET status = 'queued', updated_at = clock_timestamp(),
            ingest_job_id = yuxi.kb_document_ingest_job(p_id, p_delay_seconds * v_doc.attempts)
        WHERE d.id = p_id RETURNING * INTO v_doc;
    ELSE
        UPDATE yuxi.kb_documents d
        SET status = 'failed', error = left(coalesce(p_error, 'ingestion failed'), 2000),
            updated_at = clock_timestamp()
        WHERE d.id = p_id RETURNING * INTO v_doc;
    END IF;
    RETURN yuxi.kb_document_info_of(v_doc);
END;
$$;
COMMENT ON FUNCTION yuxi.kb_document_fail(uuid, integer, text, boolean, integer, double precision) IS
    'Worker: ends a failed ingestion attempt: queued again (p_retry, attempts left) or failed with the error. Raises lease_lost (YL001)';

-- Documents whose ingestion nothing will finish: queued or processing, and their job
-- is gone, ended, or held by a procrastinate worker silent for p_stalled_seconds (killed).
-- Each is queued again with a new job, or failed after p_max_attempts attempts.
CREATE FUNCTION yuxi.kb_document_redeliver_stalled(
    p_stalled_seconds double precision DEFAULT 30, p_max_attempts integer DEFAULT 3,
    p_limit integer DEFAULT 100, p_now timestamptz DEFAULT NULL
) RETURNS TABLE (document_id uuid, status text, job_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_before timestamptz;
    v_doc yuxi.kb_documents;
BEGIN
    IF p_stalled_seconds IS NULL OR p_stalled_seconds <= 0 THEN
        RAISE EXCEPTION 'stalled_seconds must be positive' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_before := coalesce(p_now, clock_timestamp()) - make_interval(secs => p_stalled_seconds);
    FOR v_doc IN
        SELECT d.* FROM yuxi.kb_documents d
        LEFT JOIN public.procrastinate_jobs j ON j.id = d.ingest_job_id
        LEFT JOIN public.procrastinate_workers w ON w.id = j.worker_id
        WHERE d.status IN ('queued', 'processing')
          AND d.updated_at < v_before
          AND (j.id IS NULL OR j.status NOT IN ('todo', 'doing')
               OR (j.status = 'doing' AND (w.id IS NULL OR w.last_heartbeat < v_before)))
        ORDER BY d.created_at
        LIMIT p_limit
        FOR UPDATE OF d SKIP LOCKED
    LOOP
        DELETE FROM public.procrastinate_jobs j WHERE j.id = v_doc.ingest_job_id AND j.status <> 'todo';
        DELETE FROM yuxi.kb_chunks c WHERE c.document_id = v_doc.id;
        document_id := v_doc.id;
        IF v_doc.attempts >= p_max_attempts THEN
            UPDATE yuxi.kb_documents d
            SET status = 'failed', updated_at = clock_timestamp(),
                error = format('ingestion was interrupted %s times (its worker stopped or was killed)', v_doc.attempts)
            WHERE d.id = v_doc.id;
            status := 'failed';
            job_id := NULL;
        ELSE
            UPDATE yuxi.kb_documents d
            SET status = 'queued', updated_at = clock_timestamp(),
                ingest_job_id = yuxi.kb_document_ingest_job(v_doc.id)
            WHERE d.id = v_doc.id
            RETURNING d.ingest_job_id INTO job_id;
            status := 'queued';
        END IF;
        RETURN NEXT;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION yuxi.kb_document_redeliver_stalled(double precision, integer, integer, timestamptz) IS
    'Maintenance: queues again (or, after p_max_attempts, fails) documents whose ingestion job is gone or held by a worker silent for p_stalled_seconds. Raises invalid_input (YV001)';

-- ---------------------------------------------------------------------------------
-- Search

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

-- Hybrid search over the ready documents of the knowledge bases in p_kb_ids (NULL:
-- all) that p_uid may read (NULL: an operator, every one). Full text: chunks matching
-- any word or CJK gram of p_query, by ts_rank. Vectors: p_embeddings maps an embedding
-- model to the query's embedding by it ({"openai:text-embedding-3-small": [...]}); the
-- chunks of knowledge bases embedded by that model are ranked by cosine similarity,
-- through the HNSW index of that dimension when pgvector is installed, by an exact scan
-- otherwise. Each list contributes its best max(4 k, 40); the fused score is the sum of
-- 1 / (60 + rank) over the lists a chunk appears in (reciprocal rank fusion).
CREATE FUNCTION yuxi.kb_search(
    p_uid uuid, p_kb_ids uuid[], p_query text, p_k integer DEFAULT 10, p_embeddings jsonb DEFAULT NULL
) RETURNS TABLE (kb_id uuid, document_id uuid, filename text, chunk integer, text text,
                 score double precision, text_rank integer, vector_rank integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_k integer := least(greatest(coalesce(p_k, 10), 1), 100);
    v_pool integer;
    v_kbs uuid[];
    v_tsq tsquery := yuxi.kb_query(p_query);
    v_docs uuid[] := '{}';
    v_seqs integer[] := '{}';
    v_lists integer[] := '{}';
    v_ranks integer[] := '{}';
    v_list integer := 0;
    v_found_docs uuid[];
    v_found_seqs integer[];
    v_model text;
    v_vector jsonb;
    v_query real[];
    v_dims integer;
    v_model_kbs uuid[];
    v_schema text;
    v_iterative text;
    v_ef text;
BEGIN
    v_pool := greatest(4 * v_k, 40);
    SELECT array_agg(r) INTO v_kbs FROM yuxi.kb_readable(p_uid) AS r
    WHERE p_kb_ids IS NULL OR r = ANY (p_kb_ids);
    IF v_kbs IS NULL THEN
        RETURN;
    END IF;

    IF v_tsq IS NOT NULL THEN
        SELECT coalesce(array_agg(t.document_id ORDER BY t.r), '{}'), coalesce(array_agg(t.seq ORDER BY t.r), '{}')
        INTO v_found_docs, v_found_seqs
        FROM (SELECT c.document_id, c.seq,
                     row_number() OVER (ORDER BY ts_rank(c.search, v_tsq) DESC, c.document_id, c.seq) AS r
              FROM yuxi.kb_chunks c
              WHERE c.kb_id = ANY (v_kbs) AND c.search @@ v_tsq
              ORDER BY ts_rank(c.search, v_tsq) DESC, c.document_id, c.seq
              LIMIT v_pool) t;
        v_docs := v_docs || v_found_docs;
        v_seqs := v_seqs || v_found_seqs;
        v_lists := v_lists || array_fill(v_list, ARRAY[cardinality(v_found_docs)]);
        v_ranks := v_ranks || ARRAY(SELECT generate_series(1, cardinality(v_found_docs)));
    END IF;

    SELECT n.nspname INTO v_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'vector';
    FOR v_model, v_vector IN SELECT * FROM jsonb_each(coalesce(p_embeddings, '{}')) LOOP
        SELECT array_agg(k.id) INTO v_model_kbs FROM yuxi.knowledge_bases k
        WHERE k.id = ANY (v_kbs) AND k.embedding_model = v_model;
        CONTINUE WHEN v_model_kbs IS NULL OR jsonb_typeof(v_vector) <> 'array';
        v_query := ARRAY(SELECT x::real FROM jsonb_array_elements_text(v_vector) AS x);
        v_dims := cardinality(v_query);
        CONTINUE WHEN v_dims = 0;
        v_list := v_list + 1;
        IF v_schema IS NOT NULL AND to_regclass('yuxi.kb_chunks_hnsw_' || v_dims) IS NOT NULL THEN
            -- filtered HNSW: keep walking the graph until enough chunks pass the filter
            v_iterative := current_setting('hnsw.iterative_scan', true);
            v_ef := current_setting('hnsw.ef_search', true);
            PERFORM set_config('hnsw.iterative_scan', 'relaxed_order', true);
            PERFORM set_config('hnsw.ef_search', v_pool::text, true);
            EXECUTE format(
                'SELECT coalesce(array_agg(h.document_id ORDER BY h.distance, h.document_id, h.seq), ''{}''),
                        coalesce(array_agg(h.seq ORDER BY h.distance, h.document_id, h.seq), ''{}'')
                 FROM (SELECT c.document_id, c.seq,
                              (c.embedding::%1$I.vector(%2$s)) OPERATOR(%1$I.<=>) $2::%1$I.vector(%2$s) AS distance
                       FROM yuxi.kb_chunks c
                       WHERE c.kb_id = ANY ($1) AND cardinality(c.embedding) = %2$s
                       ORDER BY (c.embedding::%1$I.vector(%2$s)) OPERATOR(%1$I.<=>) $2::%1$I.vector(%2$s)
                       LIMIT $3) h', v_schema, v_dims)
            INTO v_found_docs, v_found_seqs
            USING v_model_kbs, v_query, v_pool;
            PERFORM set_config('hnsw.iterative_scan', coalesce(nullif(v_iterative, ''), 'off'), true);
            PERFORM set_config('hnsw.ef_search', coalesce(nullif(v_ef, ''), '40'), true);
        ELSE
            SELECT coalesce(array_agg(h.document_id ORDER BY h.r), '{}'), coalesce(array_agg(h.seq ORDER BY h.r), '{}')
            INTO v_found_docs, v_found_seqs
            FROM (SELECT s.document_id, s.seq,
                         row_number() OVER (ORDER BY s.similarity DESC, s.document_id, s.seq) AS r
                  FROM (SELECT c.document_id, c.seq,
                               (SELECT sum(a * b) FROM unnest(c.embedding, v_query) AS t(a, b)) AS similarity
                        FROM yuxi.kb_chunks c
                        WHERE c.kb_id = ANY (v_model_kbs) AND cardinality(c.embedding) = v_dims) s
                  ORDER BY s.similarity DESC, s.document_id, s.seq
                  LIMIT v_pool) h;
        END IF;
        v_docs := v_docs || v_found_docs;
        v_seqs := v_seqs || v_found_seqs;
        v_lists := v_lists || array_fill(v_list, ARRAY[cardinality(v_found_docs)]);
        v_ranks := v_ranks || ARRAY(SELECT generate_series(1, cardinality(v_found_docs)));
    END LOOP;

    RETURN QUERY
    SELECT c.kb_id, c.document_id, d.filename, c.seq, c.text, f.score, f.text_rank, f.vector_rank
    FROM (SELECT h.document_id, h.seq, sum(1.0 / (60 + h.rank))::double precision AS score,
                 min(h.rank) FILTER (WHERE h.list = 0)::integer AS text_rank,
                 min(h.rank) FILTER (WHERE h.list > 0)::integer AS vector_rank
          FROM unnest(v_docs, v_seqs, v_lists, v_ranks) AS h(document_id, seq, list, rank)
          GROUP BY h.document_id, h.seq) f
    JOIN yuxi.kb_chunks c ON c.document_id = f.document_id AND c.seq = f.seq
    JOIN yuxi.kb_documents d ON d.id = c.document_id AND d.status = 'ready'
    ORDER BY f.score DESC, c.document_id, c.seq
    LIMIT v_k;
END;
$$;
COMMENT ON FUNCTION yuxi.kb_search(uuid, uuid[], text, integer, jsonb) IS
    'Hybrid search over the ready documents of the knowledge bases a user may read (p_kb_ids narrows): full-text rank (CJK-aware) and, per embedding model in p_embeddings, cosine similarity (HNSW with pgvector, exact without), fused by reciprocal rank; the best p_k (1-100)';

SELECT yuxi.kb_vector_setup();
