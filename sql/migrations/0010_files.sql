-- Files, attachments and the thread's workdir (issue: files and attachments).

-- The name an attachment is stored under in uploads/: one path component, no leading
-- dot (nothing hidden, never . or ..), no slash, backslash or control character, at
-- most 255 bytes (what a filesystem takes). The API sanitises names to this.
CREATE FUNCTION yuxi.attachment_name_is_valid(p_name text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_name ~ '^[^./\\[:cntrl:]][^/\\[:cntrl:]]*$' AND octet_length(p_name) <= 255
$$;
COMMENT ON FUNCTION yuxi.attachment_name_is_valid(text) IS
    'True for an attachment''s stored name: one path component of at most 255 bytes, not starting with a dot, without slash, backslash or control characters';

-- Files a user attached to a conversation, stored in its workdir under uploads/. The
-- row is written in the transaction that moves the uploaded file into place, under the
-- conversation's lock, so the thread's total cannot pass its limit (yuxi.attachment_add).
CREATE TABLE yuxi.attachments (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    thread_id   uuid NOT NULL REFERENCES yuxi.conversations (thread_id) ON DELETE CASCADE,
    uid         uuid NOT NULL REFERENCES yuxi.users (id) ON DELETE CASCADE,
    filename    text NOT NULL CHECK (yuxi.attachment_name_is_valid(filename)),
    bytes       bigint NOT NULL CHECK (bytes >= 0),
    sha256      text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    media_type  text NOT NULL CHECK (media_type ~ '^[a-z0-9.+-]+/[a-z0-9.+-]+$'),
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (thread_id, filename)
);
COMMENT ON TABLE yuxi.attachments IS
    'Files attached to a conversation: each is uploads/<filename> in its workdir. Written by yuxi.attachment_add';
COMMENT ON COLUMN yuxi.attachments.uid IS 'The user who uploaded the file';
COMMENT ON COLUMN yuxi.attachments.filename IS
    'The stored name (sanitised; a suffix " (2)" and so on when the name was taken)';

ALTER TYPE yuxi.thread_info ADD ATTRIBUTE workdir text;
COMMENT ON TYPE yuxi.thread_info IS
    'A thread as the API shows it; thread_status is loading, ready or done; workdir is relative to the user''s workspace';

-- A conversation as the API shows it.
-- A conversation's workdir as its user sees it, relative to their workspace:
-- threads/<thread_id>, or the project's directory (projects/<name>: the API creates
-- projects inside <YUXI_HOME>/workspaces/<uid>/); NULL for a project directory outside
-- the workspace (set by hand), whose host path is not shown.
CREATE FUNCTION yuxi.thread_workdir_shown(c yuxi.conversations) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN c.project_id IS NULL THEN 'threads/' || c.thread_id
                ELSE (SELECT substring(p.workdir_path FROM '/workspaces/' || c.uid || '/([^/].*)$')
                      FROM yuxi.projects p WHERE p.id = c.project_id)
           END
$$;
COMMENT ON FUNCTION yuxi.thread_workdir_shown(yuxi.conversations) IS
    'Internal: the conversation''s workdir relative to its user''s workspace (threads/<id> or the project''s directory), NULL when outside it';

CREATE OR REPLACE FUNCTION yuxi.thread_info_of(c yuxi.conversations) RETURNS yuxi.thread_info
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (c.thread_id, c.agent_slug, c.project_id, c.title,
            yuxi.thread_status_of(c.last_run_id, c.last_viewed_run_id), c.created_at,
            c.updated_at, yuxi.thread_workdir_shown(c))::yuxi.thread_info;
END;
$$;
COMMENT ON FUNCTION yuxi.thread_info_of(yuxi.conversations) IS
    'Internal: a conversation row as yuxi.thread_info';

-- A thread's attachments as the worker tells the model of them (run_execution_input):
-- [{id, filename, path, bytes, media_type}], oldest first; [] for none.
CREATE FUNCTION yuxi.thread_attachments_json(p_thread_id uuid) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'id', a.id, 'filename', a.filename, 'path', 'uploads/' || a.filename,
               'bytes', a.bytes, 'media_type', a.media_type) ORDER BY a.created_at, a.id), '[]')
    FROM yuxi.attachments a WHERE a.thread_id = p_thread_id
$$;
COMMENT ON FUNCTION yuxi.thread_attachments_json(uuid) IS
    'Internal: a thread''s attachments as JSON [{id, filename, path, bytes, media_type}], oldest first';

-- Renames a thread (its title); nothing else about it changes.
CREATE FUNCTION yuxi.thread_rename(p_uid uuid, p_thread_id uuid, p_title text) RETURNS yuxi.thread_info
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
BEGIN
    IF p_title IS NULL OR length(p_title) > 200 THEN
        RAISE EXCEPTION 'a title is at most 200 characters' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    UPDATE yuxi.conversations SET title = p_title, updated_at = clock_timestamp()
    WHERE thread_id = p_thread_id AND uid = p_uid AND status = 'active'
    RETURNING * INTO v_conv;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'thread % not found', p_thread_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN yuxi.thread_info_of(v_conv);
END;
$$;
COMMENT ON FUNCTION yuxi.thread_rename(uuid, uuid, text) IS
    'Sets a live thread''s title (at most 200 characters); returns the thread. Raises invalid_input (YV001), not_found (YN001)';

-- Where a live thread of the user keeps its files: the project's workdir_path (a host
-- path, for the API's file routes only; never sent to a client), or NULL for the
-- default <workspace>/threads/<thread_id>.
CREATE FUNCTION yuxi.thread_workdir(p_uid uuid, p_thread_id uuid) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_path text;
BEGIN
    SELECT p.workdir_path INTO v_path
    FROM yuxi.conversations c LEFT JOIN yuxi.projects p ON p.id = c.project_id
    WHERE c.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'thread % not found', p_thread_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN v_path;
END;
$$;
COMMENT ON FUNCTION yuxi.thread_workdir(uuid, uuid) IS
    'The host path of a live thread''s project workdir, or NULL for the default threads/<id> in the user''s workspace (API file routes; never shown to clients). Raises not_found (YN001)';

-- The subagent runs of a thread (the state view's subagent_runs): each child run with
-- its agent, status and the run that started it, in creation order.
CREATE FUNCTION yuxi.thread_subagent_runs(p_uid uuid, p_thread_id uuid)
RETURNS TABLE (run_id uuid, agent_slug text, status text, created_by_run_id uuid,
               created_at timestamptz, finished_at timestamptz, error_message text)
LANGUAGE sql STABLE AS $$
    SELECT r.run_id, r.agent_slug, r.status, r.created_by_run_id, r.created_at, r.finished_at,
           r.error_message
    FROM yuxi.agent_runs r
    JOIN yuxi.conversations c ON c.thread_id = r.thread_id
    WHERE r.thread_id = p_thread_id AND r.run_type = 'subagent' AND c.uid = p_uid
      AND c.status = 'active'
    ORDER BY r.created_at, r.run_id
$$;
COMMENT ON FUNCTION yuxi.thread_subagent_runs(uuid, uuid) IS
    'The subagent runs of the user''s thread (agent, status, parent run), in creation order';

-- The thread as the API shows it (Thread).
CREATE OR REPLACE FUNCTION yuxi.thread_json(t yuxi.thread_info) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT '{"id":"' || t.id
        || '","agent_id":' || yuxi.json_text(t.agent_id)
        || ',"project_id":' || yuxi.json_text(t.project_id::text)
        || ',"title":' || yuxi.json_text(t.title)
        || ',"thread_status":' || yuxi.json_text(t.thread_status)
        || ',"created_at":' || yuxi.json_time(t.created_at)
        || ',"updated_at":' || yuxi.json_time(t.updated_at)
        || ',"workdir":' || yuxi.json_text(t.workdir)
        || '}'
$$;
COMMENT ON FUNCTION yuxi.thread_json(yuxi.thread_info) IS
    'Internal: a thread as the API renders it (JSON text)';

-- The execution input and the claim gain the thread's attachments in 0011_models,
-- which creates them again with the run's model as well.

-- Records an uploaded file of p_bytes as uploads/<name> of the thread: the name asked
-- for, or "<stem> (2)<ext>", "(3)", … when it is taken by another attachment or by a
-- file already on disk (p_taken, the names the caller found in uploads/). The same
-- name with the same content returns the attachment already there (created false).
-- Raises payload_too_large when the thread's attachments would pass p_thread_limit
-- bytes.
CREATE FUNCTION yuxi.attachment_add(
    p_uid uuid, p_thread_id uuid, p_filename text, p_bytes bigint, p_sha256 text,
    p_media_type text, p_thread_limit bigint, p_taken text[] DEFAULT '{}'
) RETURNS TABLE (id uuid, filename text, bytes bigint, sha256 text, media_type text,
                 created_at timestamptz, uid uuid, created boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
    v_used bigint;
    v_name text := p_filename;
    v_stem text;
    v_ext text;
    v_n integer := 1;
    v_row yuxi.attachments;
BEGIN
    IF NOT coalesce(yuxi.attachment_name_is_valid(p_filename), false) THEN
        RAISE EXCEPTION 'invalid attachment name %', p_filename USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_conv := yuxi.thread_lock(p_uid, p_thread_id);
    SELECT * INTO v_row FROM yuxi.attachments a
    WHERE a.thread_id = p_thread_id AND a.filename = p_filename AND a.sha256 = p_sha256;
    IF FOUND THEN
        RETURN QUERY SELECT v_row.id, v_row.filename, v_row.bytes, v_row.sha256, v_row.media_type,
                            v_row.created_at, v_row.uid, false;
        RETURN;
    END IF;
    SELECT coalesce(sum(a.bytes), 0) INTO v_used FROM yuxi.attachments a WHERE a.thread_id = p_thread_id;
    IF v_used + p_bytes > p_thread_limit THEN
        RAISE EXCEPTION 'the thread''s attachments would take % bytes; its limit is % (% in use)',
            v_used + p_bytes, p_thread_limit, v_used
            USING ERRCODE = 'YF001', HINT = 'payload_too_large';
    END IF;
    v_stem := coalesce(substring(p_filename FROM '^(.+)\.[^.]+$'), p_filename);
    v_ext := coalesce(substring(p_filename FROM '^.+(\.[^.]+)$'), '');
    WHILE v_name = ANY (p_taken)
          OR EXISTS (SELECT 1 FROM yuxi.attachments a WHERE a.thread_id = p_thread_id AND a.filename = v_name) LOOP
        v_n := v_n + 1;
        v_name := v_stem || ' (' || v_n || ')' || v_ext;
        IF octet_length(v_name) > 255 THEN
            v_name := left(v_stem, 200) || ' (' || v_n || ')' || left(v_ext, 40);
        END IF;
    END LOOP;
    INSERT INTO yuxi.attachments (thread_id, uid, filename, bytes, sha256, media_type)
    VALUES (p_thread_id, p_uid, v_name, p_bytes, p_sha256, p_media_type)
    RETURNING * INTO v_row;
    RETURN QUERY SELECT v_row.id, v_row.filename, v_row.bytes, v_row.sha256, v_row.media_type,
                        v_row.created_at, v_row.uid, true;
END;
$$;
COMMENT ON FUNCTION yuxi.attachment_add(uuid, uuid, text, bigint, text, text, bigint, text[]) IS
    'API: records an uploaded file as uploads/<name> of a live thread (a free name; the same name and content return the existing one, created false), under the conversation''s lock. Raises invalid_input (YV001), not_found (YN001), payload_too_large (YF001)';

-- The thread's attachments, oldest first.
CREATE FUNCTION yuxi.attachment_list(p_uid uuid, p_thread_id uuid)
RETURNS TABLE (id uuid, filename text, bytes bigint, sha256 text, media_type text,
               created_at timestamptz, uid uuid)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM yuxi.thread_get(p_uid, p_thread_id);
    RETURN QUERY
    SELECT a.id, a.filename, a.bytes, a.sha256, a.media_type, a.created_at, a.uid
    FROM yuxi.attachments a WHERE a.thread_id = p_thread_id
    ORDER BY a.created_at, a.id;
END;
$$;
COMMENT ON FUNCTION yuxi.attachment_list(uuid, uuid) IS
    'The attachments of a live thread of the user, oldest first. Raises not_found (YN001)';

-- Removes one attachment's row and returns its stored name; the caller removes the
-- file (uploads/<filename>) once this has committed.
CREATE FUNCTION yuxi.attachment_delete(p_uid uuid, p_thread_id uuid, p_id uuid) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_name text;
BEGIN
    PERFORM yuxi.thread_lock(p_uid, p_thread_id);
    DELETE FROM yuxi.attachments a WHERE a.id = p_id AND a.thread_id = p_thread_id
    RETURNING a.filename INTO v_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'attachment % not found', p_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN v_name;
END;
$$;
COMMENT ON FUNCTION yuxi.attachment_delete(uuid, uuid, uuid) IS
    'API: removes an attachment of a live thread of the user; returns its stored name (the caller deletes uploads/<name>). Raises not_found (YN001)';
