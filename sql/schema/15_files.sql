-- yuxi: files attached to conversations (yuxi.attachments, in 02_tables.sql).
--
-- The API streams an upload into the file store (an unlinked content, 26_file_store.sql),
-- then, in one transaction, calls yuxi.attachment_add (which locks the conversation,
-- checks the thread's total and picks the stored name) and links the file at
-- uploads/<name> of the conversation's workdir tree (yuxi.file_put) before it commits;
-- a failed commit links nothing, and the upload is aborted. Uploads to one thread are
-- thus serialised on its conversation row, and no number of concurrent uploads can take
-- a thread past its limit.

-- Records an uploaded file of p_bytes as uploads/<name> of the thread: the name asked
-- for, or "<stem> (2)<ext>", "(3)", … when it is taken by another attachment or by a
-- file or directory already there (p_taken, the names the caller found in uploads/). The same
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
-- file (uploads/<filename> of the workdir tree) in the same transaction.
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

-- Records which of the thread's attachments the user message p_message_id refers to
-- (a run body's `attachments`, and an image sent with it): in its metadata, once
-- (yuxi.messages_guard keeps it). The run that serves the message reads them
-- (yuxi.run_execution_input.input_attachments); a model with vision gets the images.
CREATE FUNCTION yuxi.message_refer_attachments(p_uid uuid, p_message_id bigint, p_ids uuid[])
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_thread uuid;
    v_missing text;
BEGIN
    SELECT m.thread_id INTO v_thread FROM yuxi.messages m
    JOIN yuxi.conversations c ON c.thread_id = m.thread_id
    WHERE m.id = p_message_id AND m.role = 'user' AND (p_uid IS NULL OR c.uid = p_uid);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'message % not found', p_message_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    SELECT string_agg(i::text, ', ') INTO v_missing FROM unnest(p_ids) i
    WHERE NOT EXISTS (SELECT 1 FROM yuxi.attachments a WHERE a.id = i AND a.thread_id = v_thread);
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION 'not attachments of this thread: %', v_missing
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    UPDATE yuxi.messages
    SET metadata = metadata || jsonb_build_object(
            'attachments', (SELECT jsonb_agg(DISTINCT i) FROM unnest(p_ids) i))
    WHERE id = p_message_id;
END;
$$;
COMMENT ON FUNCTION yuxi.message_refer_attachments(uuid, bigint, uuid[]) IS
    'Records the thread''s attachments a user message refers to, in its metadata, once. Raises not_found (YN001), invalid_input (YV001)';
