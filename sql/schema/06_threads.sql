-- yuxi: conversations (threads): locking one, creating, reading, deleting, and the
-- queue state of each.
--
-- Reads scoped to one user: unknown, deleted and other users' threads are all "not
-- found" (YN001), so their existence does not leak.

-- Locks a live conversation the caller may use. Unknown, deleted and other users'
-- threads are all "not found" so their existence does not leak.
CREATE FUNCTION yuxi.thread_lock(p_uid uuid, p_thread_id uuid) RETURNS yuxi.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
BEGIN
    SELECT * INTO v_conv FROM yuxi.conversations
    WHERE thread_id = p_thread_id AND status = 'active' AND (p_uid IS NULL OR uid = p_uid)
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'thread % not found', p_thread_id
            USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    IF NOT yuxi.agent_visible_to(v_conv.agent_slug, v_conv.uid) THEN
        RAISE EXCEPTION 'agent % of thread % is not available to this user', v_conv.agent_slug, p_thread_id
            USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN v_conv;
END;
$$;
COMMENT ON FUNCTION yuxi.thread_lock(uuid, uuid) IS
    'Internal: locks a live conversation the caller may use (FOR UPDATE) and returns it. Raises not_found (YN001)';

-- Creates a conversation bound to an agent the user can see, in a project the user
-- owns (or none).
CREATE FUNCTION yuxi.thread_create(
    p_uid uuid, p_agent_slug text, p_project_id uuid DEFAULT NULL, p_title text DEFAULT ''
) RETURNS yuxi.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
BEGIN
    IF NOT yuxi.agent_visible_to(p_agent_slug, p_uid) THEN
        RAISE EXCEPTION 'agent % not found', p_agent_slug USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    IF p_project_id IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM yuxi.projects WHERE id = p_project_id AND uid = p_uid AND deleted_at IS NULL) THEN
        RAISE EXCEPTION 'project % not found', p_project_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    INSERT INTO yuxi.conversations (uid, agent_slug, project_id, title)
    VALUES (p_uid, p_agent_slug, p_project_id, coalesce(p_title, ''))
    RETURNING * INTO v_conv;
    RETURN v_conv;
END;
$$;
COMMENT ON FUNCTION yuxi.thread_create(uuid, text, uuid, text) IS
    'Creates a conversation bound to an agent the user can see, in a project the user owns (or none). Raises not_found (YN001)';

-- loading: a run is pending or running; ready: a run finished since the thread was last
-- viewed; done: nothing new.
CREATE FUNCTION yuxi.thread_status_of(p_last_run_id uuid, p_last_viewed_run_id uuid)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_status text;
BEGIN
    IF p_last_run_id IS NULL THEN
        RETURN 'done';
    END IF;
    SELECT status INTO v_status FROM yuxi.agent_runs WHERE run_id = p_last_run_id;
    IF yuxi.run_is_active(v_status) THEN
        RETURN 'loading';
    ELSIF v_status IS NOT NULL AND p_last_run_id IS DISTINCT FROM p_last_viewed_run_id THEN
        RETURN 'ready';
    END IF;
    RETURN 'done';
END;
$$;
COMMENT ON FUNCTION yuxi.thread_status_of(uuid, uuid) IS
    'Internal: loading (a run is active), ready (a run finished since the thread was last viewed) or done';

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

CREATE FUNCTION yuxi.thread_info_of(c yuxi.conversations) RETURNS yuxi.thread_info
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (c.thread_id, c.agent_slug, c.project_id, c.title,
            yuxi.thread_status_of(c.last_run_id, c.last_viewed_run_id), c.created_at,
            c.updated_at, yuxi.thread_workdir_shown(c))::yuxi.thread_info;
END;
$$;
COMMENT ON FUNCTION yuxi.thread_info_of(yuxi.conversations) IS
    'Internal: a conversation row as yuxi.thread_info';

CREATE FUNCTION yuxi.thread_get(p_uid uuid, p_thread_id uuid) RETURNS yuxi.thread_info
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_conv yuxi.conversations;
BEGIN
    SELECT * INTO v_conv FROM yuxi.conversations
    WHERE thread_id = p_thread_id AND uid = p_uid AND status = 'active';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'thread % not found', p_thread_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN yuxi.thread_info_of(v_conv);
END;
$$;
COMMENT ON FUNCTION yuxi.thread_get(uuid, uuid) IS
    'A live thread of the user as yuxi.thread_info. Raises not_found (YN001)';

CREATE FUNCTION yuxi.thread_list(p_uid uuid) RETURNS SETOF yuxi.thread_info
LANGUAGE sql STABLE AS $$
    SELECT (yuxi.thread_info_of(c)).*
    FROM yuxi.conversations c
    WHERE c.uid = p_uid AND c.status = 'active'
    ORDER BY c.updated_at DESC, c.thread_id
$$;
COMMENT ON FUNCTION yuxi.thread_list(uuid) IS
    'The user''s live threads, most recently updated first';

-- Marks the thread's latest run as seen. Reading history never does this.
CREATE FUNCTION yuxi.thread_mark_viewed(p_uid uuid, p_thread_id uuid) RETURNS yuxi.thread_info
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
BEGIN
    -- A run still in progress is not "seen": it becomes ready when it finishes.
    UPDATE yuxi.conversations c
    SET last_viewed_run_id = CASE
            WHEN EXISTS (SELECT 1 FROM yuxi.agent_runs r WHERE r.run_id = c.last_run_id
                         AND yuxi.run_is_active(r.status))
            THEN c.last_viewed_run_id ELSE c.last_run_id END
    WHERE c.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active'
    RETURNING * INTO v_conv;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'thread % not found', p_thread_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN yuxi.thread_info_of(v_conv);
END;
$$;
COMMENT ON FUNCTION yuxi.thread_mark_viewed(uuid, uuid) IS
    'Marks the thread''s latest finished run as seen; returns the thread. Raises not_found (YN001)';

-- A thread's attachments as the worker tells the model of them (run_execution_input):
-- [{id, filename, path, bytes, media_type}], oldest first; [] for none. PL/pgSQL, whose
-- plan is kept: a SQL function with a FROM is never inlined, and PostgreSQL before 18
-- planned it on every call.
CREATE FUNCTION yuxi.thread_attachments_json(p_thread_id uuid) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'id', a.id, 'filename', a.filename, 'path', 'uploads/' || a.filename,
                       'bytes', a.bytes, 'media_type', a.media_type) ORDER BY a.created_at, a.id), '[]')
            FROM yuxi.attachments a WHERE a.thread_id = p_thread_id);
END;
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

-- Soft-deletes a thread: its queued requests are cancelled and its active run is asked
-- to stop, so nothing keeps running for a conversation nobody can see.
CREATE FUNCTION yuxi.thread_delete(p_uid uuid, p_thread_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
    v_request text;
BEGIN
    SELECT * INTO v_conv FROM yuxi.conversations
    WHERE thread_id = p_thread_id AND uid = p_uid AND status = 'active'
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'thread % not found', p_thread_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    FOR v_request IN
        SELECT request_id FROM yuxi.agent_run_requests WHERE thread_id = p_thread_id AND status = 'queued'
    LOOP
        UPDATE yuxi.agent_run_requests SET status = 'cancelled', updated_at = clock_timestamp()
        WHERE request_id = v_request;
        UPDATE yuxi.messages SET delivery_status = 'cancelled'
        WHERE request_id = v_request AND role = 'user';
    END LOOP;
    IF EXISTS (SELECT 1 FROM yuxi.agent_runs WHERE run_id = v_conv.last_run_id
               AND yuxi.run_is_cancellable(status)) THEN
        PERFORM yuxi.run_request_cancel(v_conv.last_run_id, p_uid);
    END IF;
    UPDATE yuxi.conversations SET status = 'deleted', paused_by_run_id = NULL, updated_at = clock_timestamp()
    WHERE thread_id = p_thread_id;
END;
$$;
COMMENT ON FUNCTION yuxi.thread_delete(uuid, uuid) IS
    'Soft-deletes a thread: cancels its queued requests and asks its last run to stop. Raises not_found (YN001)';

-- The queue state of every live thread: what an operator looks at first.
-- `stalled` (an idle thread holding a backlog without a pause) is only reachable by
-- hand; thread_continue dispatches it like a paused one.
CREATE VIEW yuxi.thread_queues AS
SELECT q.thread_id,
       q.uid,
       CASE
           WHEN q.busy THEN 'running'
           WHEN q.last_run_status = 'interrupted' THEN 'interrupted'
           WHEN q.paused_by_run_id IS NOT NULL OR q.queued_count > 0 THEN 'paused'
           ELSE 'ready'
       END AS status,
       CASE
           WHEN q.busy THEN NULL
           WHEN q.last_run_status = 'interrupted' THEN 'run_interrupted'
           WHEN q.paused_by_run_id IS NOT NULL THEN 'run_' || q.paused_by_status
           WHEN q.queued_count > 0 THEN 'stalled'
       END AS paused_reason,
       CASE
           WHEN q.busy OR q.last_run_status = 'interrupted' THEN q.last_run_id
           ELSE q.paused_by_run_id
       END AS blocking_run_id,
       (NOT q.busy AND q.last_run_status IS DISTINCT FROM 'interrupted'
        AND (q.paused_by_run_id IS NOT NULL OR q.queued_count > 0)) AS can_continue,
       q.queued_count,
       q.last_run_id,
       q.last_run_status
FROM (
    SELECT c.thread_id, c.uid, c.paused_by_run_id, pr.status AS paused_by_status,
           lr.run_id AS last_run_id, lr.status AS last_run_status,
           coalesce(yuxi.run_is_active(lr.status), false) AS busy,
           (SELECT count(*) FROM yuxi.agent_run_requests r
            WHERE r.thread_id = c.thread_id AND r.status = 'queued') AS queued_count
    FROM yuxi.conversations c
    LEFT JOIN yuxi.agent_runs lr ON lr.run_id = c.last_run_id
    LEFT JOIN yuxi.agent_runs pr ON pr.run_id = c.paused_by_run_id
    WHERE c.status = 'active'
) q;
COMMENT ON VIEW yuxi.thread_queues IS
    'The queue state of every live thread: running, interrupted, paused or ready, with why and what blocks it';

-- Resumes a backlog paused by a failed or cancelled run: dispatches its head.
CREATE FUNCTION yuxi.thread_continue(p_thread_id uuid, p_uid uuid DEFAULT NULL) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
BEGIN
    v_conv := yuxi.thread_lock(p_uid, p_thread_id);
    IF EXISTS (SELECT 1 FROM yuxi.agent_runs WHERE run_id = v_conv.last_run_id
               AND NOT yuxi.run_is_final(status)) THEN
        RAISE EXCEPTION 'thread % has run % in progress', p_thread_id, v_conv.last_run_id
            USING ERRCODE = 'YQ003', HINT = 'run_busy';
    END IF;
    -- An idle thread with a backlog and no pause is only reachable by hand (e.g. a raw
    -- UPDATE that cancelled a run); continuing it is the way out, so it is allowed.
    IF v_conv.paused_by_run_id IS NULL AND NOT EXISTS (
           SELECT 1 FROM yuxi.agent_run_requests WHERE thread_id = p_thread_id AND status = 'queued') THEN
        RAISE EXCEPTION 'thread %''s backlog is not paused', p_thread_id
            USING ERRCODE = 'YQ009', HINT = 'queue_not_paused';
    END IF;
    UPDATE yuxi.conversations SET paused_by_run_id = NULL WHERE thread_id = p_thread_id;
    RETURN yuxi.thread_dispatch_head(v_conv);
END;
$$;
COMMENT ON FUNCTION yuxi.thread_continue(uuid, uuid) IS
    'Resumes a backlog paused by a failed or cancelled run (or stalled): dispatches its head; returns the new run or NULL. Raises run_busy (YQ003), queue_not_paused (YQ009), not_found (YN001)';

-- thread_queues with the owner's name, the agent and how long the backlog has waited.
-- Without a thread: the threads that are not `ready` (running, interrupted or paused,
-- which covers every thread with queued requests). With a thread: its row, whatever
-- its status; no row for an unknown or deleted thread.
CREATE FUNCTION yuxi.thread_queue_list(p_thread_id uuid DEFAULT NULL)
RETURNS TABLE (thread_id uuid, uid uuid, owner text, agent_slug text, status text,
               paused_reason text, blocking_run_id uuid, can_continue boolean,
               queued_count bigint, waiting_since timestamptz, last_run_id uuid,
               last_run_status text)
LANGUAGE sql STABLE AS $$
    SELECT q.thread_id, q.uid, u.name, c.agent_slug, q.status, q.paused_reason,
           q.blocking_run_id, q.can_continue, q.queued_count,
           (SELECT min(r.created_at) FROM yuxi.agent_run_requests r
            WHERE r.thread_id = q.thread_id AND r.status = 'queued'),
           q.last_run_id, q.last_run_status
    FROM yuxi.thread_queues q
    JOIN yuxi.conversations c ON c.thread_id = q.thread_id
    JOIN yuxi.users u ON u.id = q.uid
    WHERE (p_thread_id IS NULL AND q.status <> 'ready') OR q.thread_id = p_thread_id
    ORDER BY q.status, c.created_at, q.thread_id
$$;
COMMENT ON FUNCTION yuxi.thread_queue_list(uuid) IS
    'Operators: yuxi.thread_queues with owner, agent and waiting_since; without p_thread_id the threads that are not ready, else that thread''s row';
