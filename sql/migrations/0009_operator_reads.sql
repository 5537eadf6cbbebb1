-- Reads for the operator commands (`yuxi agent list`, `yuxi user list`,
-- `yuxi queue show`). They see every user's objects: an operator is asking, not a user,
-- so none of them takes a p_uid. They only read, so they are safe from psql too.

-- Every agent, deleted ones included (a deleted slug still cannot be created again).
-- shared_with lists the live users of a `selected` agent's shares: deleted users no
-- longer see anything (agent_visible_to), so listing them would mislead.
CREATE FUNCTION yuxi.agent_list()
RETURNS TABLE (slug text, name text, description text, backend_id text, config_json jsonb,
               share_scope text, shared_with uuid[], shared_with_names text[],
               is_subagent boolean, max_run_attempts integer, created_at timestamptz,
               updated_at timestamptz, deleted_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT a.slug, a.name, a.description, a.backend_id, a.config_json, a.share_scope,
           coalesce(s.ids, '{}'), coalesce(s.names, '{}'),
           a.is_subagent, a.max_run_attempts, a.created_at, a.updated_at, a.deleted_at
    FROM yuxi.agents a
    LEFT JOIN LATERAL (
        SELECT array_agg(u.id ORDER BY u.name, u.id) AS ids,
               array_agg(u.name ORDER BY u.name, u.id) AS names
        FROM yuxi.agent_shares sh
        JOIN yuxi.users u ON u.id = sh.uid AND u.deleted_at IS NULL
        WHERE sh.agent_slug = a.slug
    ) s ON true
    ORDER BY a.slug
$$;

-- Live users with how many tokens still authenticate them. Never a token or its hash.
CREATE FUNCTION yuxi.user_list()
RETURNS TABLE (id uuid, name text, is_admin boolean, active_tokens integer,
               last_used_at timestamptz, created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT u.id, u.name, u.is_admin,
           (SELECT count(*)::integer FROM yuxi.api_tokens t
            WHERE t.user_id = u.id AND t.revoked_at IS NULL),
           (SELECT max(t.last_used_at) FROM yuxi.api_tokens t WHERE t.user_id = u.id),
           u.created_at
    FROM yuxi.users u
    WHERE u.deleted_at IS NULL
    ORDER BY u.name
$$;

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

-- A thread's requests in dispatch order: those that left the queue in the order they
-- did (a dispatched request by its run's creation, which happens at dispatch), then the
-- queued ones by queue position (a steer first). Without p_all only the requests that
-- still matter: queued ones and those whose run is active or interrupted.
CREATE FUNCTION yuxi.thread_queue_requests(p_thread_id uuid, p_all boolean DEFAULT false)
RETURNS TABLE (request_id text, status text, queue_policy text, queue_position integer,
               source text, run_id uuid, run_status text, query text,
               created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT r.request_id, r.status, r.queue_policy, yuxi.request_queue_position(r), r.source,
           r.dispatched_run_id, ar.status, m.content, r.created_at
    FROM yuxi.agent_run_requests r
    LEFT JOIN yuxi.agent_runs ar ON ar.run_id = r.dispatched_run_id
    LEFT JOIN yuxi.messages m ON m.id = r.input_message_id
    WHERE r.thread_id = p_thread_id
      AND (p_all OR r.status = 'queued'
           OR ar.status IN ('pending', 'running', 'cancel_requested', 'interrupted'))
    ORDER BY r.status = 'queued', yuxi.request_queue_position(r),
             coalesce(ar.created_at, r.created_at), r.id
$$;
