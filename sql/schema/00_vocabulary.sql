-- yuxi: the words every other file uses. The values of each status are listed once, in
-- the function that the status column's CHECK constraint calls; the groups of run
-- statuses that functions, indexes and views test are the predicates below, and so is
-- the run state machine. Python mirrors them in yuxi/queue/statuses.py, and tests hold
-- the two to the same table.
--
-- Status columns stay text, not an enum or a domain: clients (psycopg, psql) see plain
-- text, `status = 'pending'` works as it always did, a query parameter compared with a
-- status column is deduced as text (with a domain, a parameter used both there and as
-- text is ambiguous), and a PL/pgSQL function can RETURN QUERY a status into a text
-- column (a domain is refused there).
--
-- The predicates are SQL functions of one expression, so PostgreSQL inlines them into
-- the queries, index predicates and CHECK constraints that call them (a partial index
-- on `WHERE yuxi.run_is_active(status)` serves a query on `status IN (...)`). An index
-- or constraint that calls one must be rebuilt if its body ever changes.
--
-- Error codes (SQLSTATE, mapped to typed errors in yuxi/queue/errors.py; the HINT
-- carries the same name for psql users):
--   YQ001 request_id_conflict        YQ006 request_already_dispatched
--   YQ002 run_interrupted            YQ007 steer_already_pending
--   YQ003 run_busy                   YQ008 run_not_steerable
--   YQ004 resume_superseded          YQ009 queue_not_paused
--   YQ005 run_not_interrupted        YQ010 run_not_claimable
--   YQ011 agent_exists               YQ012 model_exists
--   YL001 lease_lost                 YM001 manifest_conflict
--   YT001 illegal_transition         YN001 not_found
--   YV001 invalid_input              YF001 payload_too_large
--   YA001 forbidden                  YK001 knowledge_base_exists
--   YB001 insufficient_credits       YG001 thread_exists
--   YG002 assistant_mismatch         YP001 mcp_server_exists
--
-- Lock order, everywhere: conversation row, then run row. Functions that only touch a
-- run under lease (renew, append events, manifest) lock the run alone.
--
-- Functions taking p_uid accept NULL for "an operator acting as the owner".
-- Functions taking p_now use it for lease arithmetic so tests control the clock;
-- ordering timestamps (created_at) always come from clock_timestamp() taken under the
-- conversation lock, so they follow the order in which the lock was granted.

CREATE SCHEMA IF NOT EXISTS yuxi;
COMMENT ON SCHEMA yuxi IS
    'yuxi: conversations, their request queues, runs under leases, events and scheduled jobs. Reference: docs/reference/sql.md';

-- ---------------------------------------------------------------------------------
-- Statuses

CREATE FUNCTION yuxi.run_status_is_valid(p_status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_status IN
        ('pending', 'running', 'cancel_requested', 'interrupted', 'completed', 'failed', 'cancelled')
$$;
COMMENT ON FUNCTION yuxi.run_status_is_valid(text) IS
    'True for a run status: pending, running, cancel_requested, interrupted, completed, failed, cancelled';

CREATE FUNCTION yuxi.request_status_is_valid(p_status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_status IN ('queued', 'dispatched', 'cancelled', 'rejected', 'failed')
$$;
COMMENT ON FUNCTION yuxi.request_status_is_valid(text) IS
    'True for a request status: queued, dispatched, cancelled, rejected, failed';

-- A user message's delivery: it follows its request, then the run that served it.
CREATE FUNCTION yuxi.delivery_status_is_valid(p_status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_status IN ('queued', 'dispatched', 'complete', 'failed', 'cancelled', 'rejected')
$$;
COMMENT ON FUNCTION yuxi.delivery_status_is_valid(text) IS
    'True for a user message''s delivery status: queued, dispatched, complete, failed, cancelled, rejected';

CREATE FUNCTION yuxi.occurrence_status_is_valid(p_status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_status IN ('submitted', 'skipped', 'failed', 'pending_retry')
$$;
COMMENT ON FUNCTION yuxi.occurrence_status_is_valid(text) IS
    'True for a scheduled job occurrence''s status: submitted, skipped, failed, pending_retry';

-- Active: the run holds its thread (at most one active top-level run per thread).
CREATE FUNCTION yuxi.run_is_active(p_status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_status IN ('pending', 'running', 'cancel_requested')
$$;
COMMENT ON FUNCTION yuxi.run_is_active(text) IS
    'True for pending, running and cancel_requested: the run holds its thread. Every other status has finished_at set';

-- Leased: a worker holds the run (lease_token and lease_expires_at are set).
CREATE FUNCTION yuxi.run_is_leased(p_status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_status IN ('running', 'cancel_requested')
$$;
COMMENT ON FUNCTION yuxi.run_is_leased(text) IS
    'True for running and cancel_requested: a worker holds the run under a lease';

-- Final: nothing about the run changes any more. `interrupted` is neither active nor
-- final: it waits for a resume (or a cancel).
CREATE FUNCTION yuxi.run_is_final(p_status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_status IN ('completed', 'failed', 'cancelled')
$$;
COMMENT ON FUNCTION yuxi.run_is_final(text) IS
    'True for completed, failed and cancelled: the run and its outcome never change again';

-- The statuses yuxi.run_request_cancel acts on (cancel_requested is already asked).
CREATE FUNCTION yuxi.run_is_cancellable(p_status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_status IN ('pending', 'running', 'interrupted')
$$;
COMMENT ON FUNCTION yuxi.run_is_cancellable(text) IS
    'True for pending, running and interrupted: the statuses yuxi.run_request_cancel changes';

-- The run state machine, drawn in docs/queue.md and mirrored by RUN_TRANSITIONS in
-- yuxi/queue/statuses.py. Keeping the same status is not a transition: it is always
-- allowed (a lease renewal updates a running run).
CREATE FUNCTION yuxi.run_transition_allowed(p_from text, p_to text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_from
        WHEN 'pending' THEN p_to IN ('running', 'cancelled')
        WHEN 'running' THEN p_to IN ('cancel_requested', 'completed', 'failed', 'interrupted', 'pending')
        WHEN 'cancel_requested' THEN p_to IN ('cancelled', 'completed', 'failed')
        WHEN 'interrupted' THEN p_to IN ('cancelled')
        ELSE false
    END
$$;
COMMENT ON FUNCTION yuxi.run_transition_allowed(text, text) IS
    'True when a run may go from p_from to a different status p_to (the guard yuxi.agent_runs_guard refuses the rest with YT001)';

-- ---------------------------------------------------------------------------------
-- Identifiers

-- A request_id is chosen by the client (or generated, a UUID string) and names one
-- request forever. The pattern is written here only: the request table's CHECK and the
-- functions that take a request_id (request_submit, run_resume) call this. A function,
-- not a domain, for the reasons the status columns are text.
CREATE FUNCTION yuxi.request_id_is_valid(p_request_id text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_request_id ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'
$$;
COMMENT ON FUNCTION yuxi.request_id_is_valid(text) IS
    'True for a request_id: 1-128 characters of letters, digits and . _ : - starting with a letter or digit';

-- The name an attachment is stored under in uploads/: one path component, no leading
-- dot (nothing hidden, never . or ..), no slash, backslash or control character, at
-- most 255 bytes (what a filesystem takes). The API sanitises names to this.
CREATE FUNCTION yuxi.attachment_name_is_valid(p_name text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_name ~ '^[^./\\[:cntrl:]][^/\\[:cntrl:]]*$' AND octet_length(p_name) <= 255
$$;
COMMENT ON FUNCTION yuxi.attachment_name_is_valid(text) IS
    'True for an attachment''s stored name: one path component of at most 255 bytes, not starting with a dot, without slash, backslash or control characters';
