-- yuxi: the baseline, generated from sql/schema/ by
--     uv run python -m yuxi.db.migrations baseline > sql/migrations/0001_baseline.sql
-- Do not edit: change sql/schema/<noun>.sql and add a numbered delta migration.

-- =====================================================================================
-- sql/schema/00_vocabulary.sql

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
--   YQ011 agent_exists
--   YL001 lease_lost                 YM001 manifest_conflict
--   YT001 illegal_transition         YN001 not_found
--   YV001 invalid_input
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

-- =====================================================================================
-- sql/schema/01_rendering.sql

-- yuxi: history entries, the JSON each message and run carries for history reads.
--
-- GET /api/chat/thread/{id}/history returns every run and every message of a thread in
-- one response. Decoding those rows and encoding them again costs far more than the read
-- itself on a long conversation (10,000 messages: about 100 ms in Python against about
-- 20 ms in PostgreSQL), so each message and run carries its own history entry as a
-- stored generated column (messages.history_entry, agent_runs.history_entry in
-- 02_tables.sql, which is why these functions come before the tables): PostgreSQL
-- computes it on every insert and update of the row, after the BEFORE triggers, and
-- nobody can write it by hand, so it never disagrees with the row. A history read
-- concatenates the entries in chunks (12_history.sql) and the API streams them as they
-- come.
--
-- Times are rendered as the API renders them everywhere else (msgspec): UTC, ISO 8601,
-- "Z", microseconds only when not zero.

-- The entries are computed on every insert and update of a message or run, one
-- statement at a time, so the functions below are PL/pgSQL: a SQL function that cannot
-- be inlined (these could not: IMMUTABLE around STABLE to_char and to_json) is planned
-- again on each such statement, PL/pgSQL keeps its plans for the session (as SQL
-- helpers they added about 1 ms of server CPU per submitted, claimed and finished run).
-- IMMUTABLE although to_char and to_json are only STABLE: the patterns used here
-- depend on no locale or setting, the time zone is explicit, and text's JSON form
-- depends on nothing else.
CREATE FUNCTION yuxi.json_time(p_at timestamptz) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN CASE
        WHEN p_at IS NULL THEN 'null'
        WHEN date_part('microseconds', p_at)::int % 1000000 = 0
            THEN '"' || to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') || 'Z"'
        ELSE '"' || to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') || 'Z"'
    END;
END;
$$;
COMMENT ON FUNCTION yuxi.json_time(timestamptz) IS
    'Internal: a time as the API renders it in JSON (UTC, ISO 8601, Z), or null';

-- A JSON string (escaped) or null.
CREATE FUNCTION yuxi.json_text(p_value text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN coalesce(to_json(p_value)::text, 'null');
END;
$$;
COMMENT ON FUNCTION yuxi.json_text(text) IS
    'Internal: a JSON string (escaped), or null';

-- One element of history's `history`: the fields of HistoryMessage, in its order. One
-- PL/pgSQL call per written row, the text fields escaped inline (to_json).
CREATE FUNCTION yuxi.message_history_entry(
    p_id bigint, p_role text, p_content text, p_run_id uuid, p_request_id text,
    p_delivery_status text, p_metadata jsonb, p_created_at timestamptz
) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN '{"id":' || p_id
        || ',"role":' || to_json(p_role)
        || ',"content":' || to_json(p_content)
        || ',"run_id":' || coalesce('"' || p_run_id || '"', 'null')
        || ',"request_id":' || coalesce(to_json(p_request_id)::text, 'null')
        || ',"delivery_status":' || coalesce(to_json(p_delivery_status)::text, 'null')
        || ',"metadata":' || p_metadata
        || ',"created_at":' || yuxi.json_time(p_created_at)
        || '}';
END;
$$;
COMMENT ON FUNCTION yuxi.message_history_entry(bigint, text, text, uuid, text, text, jsonb, timestamptz) IS
    'Internal: a message as one element of history''s "history" (computes messages.history_entry)';

-- One element of history's `runs`: the fields of HistoryRun, in its order.
CREATE FUNCTION yuxi.run_history_entry(
    p_run_id uuid, p_request_id text, p_run_type text, p_created_by_run_id uuid,
    p_status text, p_created_at timestamptz, p_started_at timestamptz,
    p_finished_at timestamptz
) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN '{"run_id":"' || p_run_id
        || '","request_id":' || to_json(p_request_id)
        || ',"run_type":' || to_json(p_run_type)
        || ',"created_by_run_id":' || coalesce('"' || p_created_by_run_id || '"', 'null')
        || ',"status":' || to_json(p_status)
        || ',"timing":{"created_at":' || yuxi.json_time(p_created_at)
        || ',"started_at":' || yuxi.json_time(p_started_at)
        || ',"finished_at":' || yuxi.json_time(p_finished_at)
        || '}}';
END;
$$;
COMMENT ON FUNCTION yuxi.run_history_entry(uuid, text, text, uuid, text, timestamptz, timestamptz, timestamptz) IS
    'Internal: a run as one element of history''s "runs" (computes agent_runs.history_entry)';

-- =====================================================================================
-- sql/schema/02_tables.sql

-- yuxi: every table, index and constraint, and the composite types functions return.
--
-- State transitions are owned by the functions in the files that follow and guarded by
-- the triggers in 11_guards.sql; the constraints here hold no matter who writes. The
-- status vocabularies and predicates they use are in 00_vocabulary.sql; the functions that
-- compute the generated history_entry columns in 01_rendering.sql.

-- System-wide defaults an operator may change from psql (e.g. the default model).
CREATE TABLE yuxi.system_settings (
    key   text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO yuxi.system_settings (key, value) VALUES
    ('default_model', 'builtin:scripted'),
    ('default_tool_approval_mode', 'auto');
COMMENT ON TABLE yuxi.system_settings IS
    'System-wide defaults an operator may change: default_model, default_tool_approval_mode';

CREATE TABLE yuxi.users (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    is_admin    boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz
);
-- A name is reusable once its user is deleted.
CREATE UNIQUE INDEX users_name_live_key ON yuxi.users (name) WHERE deleted_at IS NULL;
COMMENT ON TABLE yuxi.users IS
    'Accounts; every API call is made as one user. Soft-deleted (deleted_at), see yuxi.user_delete';

-- Only the SHA-256 of a token is stored; the token itself is shown once at creation.
CREATE TABLE yuxi.api_tokens (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id       uuid NOT NULL REFERENCES yuxi.users (id) ON DELETE CASCADE,
    token_hash    bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    name          text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz
);
CREATE INDEX api_tokens_user_idx ON yuxi.api_tokens (user_id);
COMMENT ON TABLE yuxi.api_tokens IS
    'API tokens, stored as the SHA-256 of the token only';

CREATE TABLE yuxi.projects (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    uid           uuid NOT NULL REFERENCES yuxi.users (id) ON DELETE CASCADE,
    name          text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    workdir_path  text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz
);
CREATE INDEX projects_uid_idx ON yuxi.projects (uid) WHERE deleted_at IS NULL;
COMMENT ON TABLE yuxi.projects IS
    'A user''s working directories; a conversation''s workdir is its project''s';

-- share_scope decides who sees an agent: everyone, admins only, or the users listed
-- in agent_shares.
CREATE TABLE yuxi.agents (
    slug              text PRIMARY KEY CHECK (slug ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    name              text NOT NULL,
    description       text NOT NULL DEFAULT '',
    backend_id        text NOT NULL,
    config_json       jsonb NOT NULL DEFAULT '{"context": {}}'
                      CHECK (jsonb_typeof(config_json) = 'object'
                             AND jsonb_typeof(coalesce(config_json -> 'context', '{}')) = 'object'),
    share_scope       text NOT NULL DEFAULT 'all' CHECK (share_scope IN ('all', 'admins', 'selected')),
    is_subagent       boolean NOT NULL DEFAULT false,
    -- attempts a run of this agent may take; after a lost lease a run with budget left
    -- is released to continue from its last checkpoint instead of failing.
    max_run_attempts  integer NOT NULL DEFAULT 1 CHECK (max_run_attempts BETWEEN 1 AND 10),
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    deleted_at        timestamptz
);

CREATE TABLE yuxi.agent_shares (
    agent_slug  text NOT NULL REFERENCES yuxi.agents (slug) ON DELETE CASCADE,
    uid         uuid NOT NULL REFERENCES yuxi.users (id) ON DELETE CASCADE,
    PRIMARY KEY (agent_slug, uid)
);
COMMENT ON TABLE yuxi.agents IS
    'Agents: backend, config {context: {...}}, share scope (all, admins, selected), subagent or not. Soft-deleted';
COMMENT ON COLUMN yuxi.agents.max_run_attempts IS
    'Attempts a run may take: after a lost lease a run with budget left continues from its checkpoint';
COMMENT ON TABLE yuxi.agent_shares IS
    'The users who see an agent whose share_scope is selected';

-- The conversation row is the per-thread lock: every queue operation on a thread
-- starts with SELECT ... FOR UPDATE on it.
CREATE TABLE yuxi.conversations (
    thread_id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    uid                 uuid NOT NULL REFERENCES yuxi.users (id) ON DELETE CASCADE,
    agent_slug          text NOT NULL REFERENCES yuxi.agents (slug),
    project_id          uuid REFERENCES yuxi.projects (id) ON DELETE SET NULL,
    title               text NOT NULL DEFAULT '',
    status              text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'deleted')),
    -- the conversation's saved model (second in the model resolution order)
    model_spec          text,
    -- the latest top-level (chat/resume) run: decides running/interrupted and resume
    last_run_id         uuid,
    -- set while the backlog is paused by a failed or cancelled run
    paused_by_run_id    uuid,
    last_viewed_run_id  uuid,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
-- updated_at stays out of every index: the queue touches it on each submit and finish,
-- and an update that changes no indexed column is HOT (no index writes, cheap vacuum).
CREATE INDEX conversations_uid_idx ON yuxi.conversations (uid) WHERE status = 'active';
COMMENT ON TABLE yuxi.conversations IS
    'Conversations (threads). The row is the per-thread lock: every queue operation starts with SELECT ... FOR UPDATE on it';
COMMENT ON COLUMN yuxi.conversations.model_spec IS
    'The conversation''s saved model, set when a request names one (second in the model resolution order)';
COMMENT ON COLUMN yuxi.conversations.last_run_id IS
    'The latest top-level (chat or resume) run: decides running or interrupted, and which run may be resumed';
COMMENT ON COLUMN yuxi.conversations.paused_by_run_id IS
    'Set while the backlog is paused by a failed or cancelled run';

-- uid (here and on agent_runs) is the conversation's user, copied by the functions; it
-- has no foreign key of its own: rows go with their conversation (ON DELETE CASCADE),
-- and a key on users would make every submit lock the same user row in share mode.
CREATE TABLE yuxi.agent_run_requests (
    -- internal order key; request_id is the public identity (client-chosen or generated)
    id                  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    request_id          text PRIMARY KEY CHECK (yuxi.request_id_is_valid(request_id)),
    uid                 uuid NOT NULL,
    thread_id           uuid NOT NULL REFERENCES yuxi.conversations (thread_id) ON DELETE CASCADE,
    source              text NOT NULL DEFAULT 'api' CHECK (source IN ('api', 'schedule', 'resume', 'psql')),
    queue_policy        text NOT NULL CHECK (queue_policy IN ('enqueue', 'reject', 'steer')),
    status              text NOT NULL CHECK (yuxi.request_status_is_valid(status)),
    input_message_id    bigint,
    dispatched_run_id   uuid,
    -- resolved at intake: {model_spec, tool_approval_mode} (+ resume for resume requests)
    input_payload       jsonb NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK ((status = 'dispatched') = (dispatched_run_id IS NOT NULL))
);
-- The FIFO head lookup: oldest queued request of a thread.
CREATE INDEX agent_run_requests_queue_idx
    ON yuxi.agent_run_requests (thread_id, created_at, id) WHERE status = 'queued';
-- At most one pending steer per conversation.
CREATE UNIQUE INDEX agent_run_requests_one_steer_key
    ON yuxi.agent_run_requests (thread_id) WHERE status = 'queued' AND queue_policy = 'steer';
CREATE INDEX agent_run_requests_thread_idx ON yuxi.agent_run_requests (thread_id, id);
COMMENT ON TABLE yuxi.agent_run_requests IS
    'Requests: one submitted message and its place in the thread''s FIFO queue. Guarded by yuxi.agent_run_requests_guard';
COMMENT ON COLUMN yuxi.agent_run_requests.id IS
    'Internal order key, the tie-breaker in queue order; request_id is the public identity';
COMMENT ON COLUMN yuxi.agent_run_requests.input_payload IS
    'Resolved at intake: {model_spec, tool_approval_mode} (plus resume for resume requests)';

CREATE TABLE yuxi.messages (
    id               bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    thread_id        uuid NOT NULL REFERENCES yuxi.conversations (thread_id) ON DELETE CASCADE,
    role             text NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
    content          text NOT NULL,
    run_id           uuid,
    request_id       text REFERENCES yuxi.agent_run_requests (request_id) ON DELETE CASCADE,
    delivery_status  text CHECK (yuxi.delivery_status_is_valid(delivery_status)),
    metadata         jsonb NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- history's JSON of this message (01_rendering.sql): computed by PostgreSQL on
    -- every write, after the BEFORE triggers, so it never disagrees with the row
    history_entry    text GENERATED ALWAYS AS (
                         yuxi.message_history_entry(id, role, content, run_id, request_id,
                                                    delivery_status, metadata, created_at)
                     ) STORED,
    CHECK ((role = 'user') = (delivery_status IS NOT NULL))
);
CREATE INDEX messages_thread_idx ON yuxi.messages (thread_id, id);
CREATE INDEX messages_run_idx ON yuxi.messages (run_id) WHERE run_id IS NOT NULL;
COMMENT ON TABLE yuxi.messages IS
    'A thread''s messages: user messages (with a delivery status) and a run''s output. Never rewritten';
COMMENT ON COLUMN yuxi.messages.history_entry IS
    'The message as history renders it (JSON text), generated';

ALTER TABLE yuxi.agent_run_requests
    ADD CONSTRAINT agent_run_requests_input_message_fk
    FOREIGN KEY (input_message_id) REFERENCES yuxi.messages (id) DEFERRABLE INITIALLY DEFERRED;

-- agent_slug has no foreign key: agents are only soft-deleted, and a key would make every
-- run of a popular agent lock that agent's row in share mode.
CREATE TABLE yuxi.agent_runs (
    run_id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    thread_id             uuid NOT NULL REFERENCES yuxi.conversations (thread_id) ON DELETE CASCADE,
    uid                   uuid NOT NULL,
    agent_slug            text NOT NULL,
    request_id            text NOT NULL REFERENCES yuxi.agent_run_requests (request_id) ON DELETE CASCADE,
    run_type              text NOT NULL CHECK (run_type IN ('chat', 'resume', 'subagent')),
    created_by_run_id     uuid REFERENCES yuxi.agent_runs (run_id) ON DELETE CASCADE,
    status                text NOT NULL DEFAULT 'pending' CHECK (yuxi.run_status_is_valid(status)),
    input_message_id      bigint REFERENCES yuxi.messages (id) DEFERRABLE INITIALLY DEFERRED,
    -- {model_spec, tool_approval_mode} (+ resume); inherited by resume runs
    input_payload         jsonb NOT NULL DEFAULT '{}',
    lease_token           uuid,
    lease_owner           text,
    lease_expires_at      timestamptz,
    heartbeat_at          timestamptz,
    attempt_count         integer NOT NULL DEFAULT 0,
    delivery_job_id       bigint,
    manifest              jsonb,
    manifest_fingerprint  text,
    output_message_id     bigint REFERENCES yuxi.messages (id) DEFERRABLE INITIALLY DEFERRED,
    last_event_seq        bigint NOT NULL DEFAULT 0,
    error_type            text,
    error_message         text,
    created_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    started_at            timestamptz,
    finished_at           timestamptz,
    cancel_requested_at   timestamptz,
    updated_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- history's JSON of this run, like messages.history_entry
    history_entry         text GENERATED ALWAYS AS (
                              yuxi.run_history_entry(run_id, request_id, run_type, created_by_run_id,
                                                     status, created_at, started_at, finished_at)
                          ) STORED,
    CHECK ((run_type = 'chat') = (created_by_run_id IS NULL)),
    CHECK ((manifest IS NULL) = (manifest_fingerprint IS NULL)),
    -- a lease exists exactly while a worker executes the run
    CHECK (yuxi.run_is_leased(status) = (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)),
    -- a run that no longer holds its thread has ended, for now (interrupted) or for good
    CHECK (yuxi.run_is_active(status) = (finished_at IS NULL))
);
-- At most one active top-level run per conversation. Subagent runs execute inside
-- their parent's run and are not part of the thread's queue.
CREATE UNIQUE INDEX agent_runs_one_active_key
    ON yuxi.agent_runs (thread_id)
    WHERE yuxi.run_is_active(status) AND run_type <> 'subagent';
-- Each interrupted run is resumed at most once.
CREATE UNIQUE INDEX agent_runs_one_resume_key
    ON yuxi.agent_runs (created_by_run_id) WHERE run_type = 'resume';
CREATE INDEX agent_runs_thread_idx ON yuxi.agent_runs (thread_id, created_at, run_id);
CREATE INDEX agent_runs_children_idx ON yuxi.agent_runs (created_by_run_id)
    WHERE created_by_run_id IS NOT NULL;
CREATE INDEX agent_runs_lease_idx ON yuxi.agent_runs (lease_expires_at)
    WHERE yuxi.run_is_leased(status);
CREATE INDEX agent_runs_pending_idx ON yuxi.agent_runs (created_at) WHERE status = 'pending';
COMMENT ON TABLE yuxi.agent_runs IS
    'Runs: one execution of a request, resume or subagent task, under a lease. Guarded by yuxi.agent_runs_guard';
COMMENT ON COLUMN yuxi.agent_runs.input_payload IS
    '{model_spec, tool_approval_mode} (plus resume for resume runs); inherited by resume runs';
COMMENT ON COLUMN yuxi.agent_runs.delivery_job_id IS
    'The latest procrastinate job that delivers the run';
COMMENT ON COLUMN yuxi.agent_runs.history_entry IS
    'The run as history renders it (JSON text), generated';

ALTER TABLE yuxi.conversations
    ADD CONSTRAINT conversations_last_run_fk FOREIGN KEY (last_run_id)
        REFERENCES yuxi.agent_runs (run_id) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT conversations_paused_by_run_fk FOREIGN KEY (paused_by_run_id)
        REFERENCES yuxi.agent_runs (run_id) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT conversations_last_viewed_run_fk FOREIGN KEY (last_viewed_run_id)
        REFERENCES yuxi.agent_runs (run_id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE yuxi.agent_run_requests
    ADD CONSTRAINT agent_run_requests_dispatched_run_fk FOREIGN KEY (dispatched_run_id)
        REFERENCES yuxi.agent_runs (run_id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE yuxi.messages
    ADD CONSTRAINT messages_run_fk FOREIGN KEY (run_id)
        REFERENCES yuxi.agent_runs (run_id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;

-- One row per claim. An attempt is written when it starts and once when it ends.
CREATE TABLE yuxi.agent_run_attempts (
    run_id       uuid NOT NULL REFERENCES yuxi.agent_runs (run_id) ON DELETE CASCADE,
    attempt_no   integer NOT NULL CHECK (attempt_no >= 1),
    worker       text NOT NULL,
    lease_token  uuid NOT NULL UNIQUE,
    started_at   timestamptz NOT NULL,
    ended_at     timestamptz,
    -- why it ended, when there is more to say than the outcome (release reason, lease loss)
    detail       text,
    outcome      text CHECK (outcome IN
                     ('completed', 'failed', 'cancelled', 'interrupted', 'released', 'lease_expired')),
    PRIMARY KEY (run_id, attempt_no),
    CHECK ((ended_at IS NULL) = (outcome IS NULL))
);
COMMENT ON TABLE yuxi.agent_run_attempts IS
    'One row per claim of a run, written when it starts and once when it ends';

-- Durable event log per run: SSE clients resume from any seq, at any later time.
CREATE TABLE yuxi.run_events (
    run_id      uuid NOT NULL REFERENCES yuxi.agent_runs (run_id) ON DELETE CASCADE,
    seq         bigint NOT NULL CHECK (seq >= 1),
    event       text NOT NULL CHECK (event ~ '^[a-z][a-z_]{0,31}$'),
    payload     jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (run_id, seq)
);
-- Exactly one `end` per run.
CREATE UNIQUE INDEX run_events_one_end_key ON yuxi.run_events (run_id) WHERE event = 'end';
COMMENT ON TABLE yuxi.run_events IS
    'Durable, append-only event log of each run (gap-free seq, exactly one end); SSE resumes from any seq';

-- ---------------------------------------------------------------------------------
-- Scheduled agent jobs

CREATE TABLE yuxi.scheduled_agent_jobs (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    uid                 uuid NOT NULL REFERENCES yuxi.users (id) ON DELETE CASCADE,
    project_id          uuid REFERENCES yuxi.projects (id) ON DELETE SET NULL,
    agent_slug          text NOT NULL,
    prompt              text NOT NULL CHECK (length(btrim(prompt)) BETWEEN 1 AND 100000),
    tool_approval_mode  text NOT NULL DEFAULT 'auto' CHECK (tool_approval_mode IN ('auto', 'ask')),
    cron                text NOT NULL CHECK (length(cron) BETWEEN 1 AND 200),
    timezone            text NOT NULL CHECK (length(timezone) BETWEEN 1 AND 64),
    enabled             boolean NOT NULL DEFAULT true,
    -- the next slot in UTC, computed from cron and timezone
    next_fire_at        timestamptz NOT NULL,
    last_fired_at       timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    deleted_at          timestamptz
);
-- What the ticker scans: enabled, live jobs by due time.
CREATE INDEX scheduled_agent_jobs_due_idx ON yuxi.scheduled_agent_jobs (next_fire_at)
    WHERE enabled AND deleted_at IS NULL;
CREATE INDEX scheduled_agent_jobs_uid_idx ON yuxi.scheduled_agent_jobs (uid) WHERE deleted_at IS NULL;
COMMENT ON TABLE yuxi.scheduled_agent_jobs IS
    'Scheduled agent jobs: project, agent, prompt, 5-field cron and IANA time zone, next fire time in UTC. Soft-deleted';

CREATE TABLE yuxi.scheduled_job_occurrences (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    job_id           uuid NOT NULL REFERENCES yuxi.scheduled_agent_jobs (id) ON DELETE CASCADE,
    scheduled_for    timestamptz NOT NULL,
    trigger          text NOT NULL CHECK (trigger IN ('schedule', 'manual')),
    status           text NOT NULL CHECK (yuxi.occurrence_status_is_valid(status)),
    -- what the job said when it fired: agent, prompt, approval mode, cron, zone, project
    config_snapshot  jsonb NOT NULL,
    thread_id        uuid,
    request_id       text,
    error            text,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK ((status = 'submitted') = (request_id IS NOT NULL))
);
-- At most one occurrence per job and scheduled slot, however many tickers run.
CREATE UNIQUE INDEX scheduled_job_occurrences_slot_key
    ON yuxi.scheduled_job_occurrences (job_id, scheduled_for) WHERE trigger = 'schedule';
CREATE INDEX scheduled_job_occurrences_job_idx
    ON yuxi.scheduled_job_occurrences (job_id, created_at DESC);
COMMENT ON TABLE yuxi.scheduled_job_occurrences IS
    'One row per fire of a job: at most one per job and scheduled slot';

-- ---------------------------------------------------------------------------------
-- Composite types returned by the functions

CREATE TYPE yuxi.request_info AS (
    request_id      text,
    thread_id       uuid,
    status          text,
    queue_policy    text,
    queue_position  integer,
    message_id      bigint,
    run_id          uuid,
    created_at      timestamptz
);
COMMENT ON TYPE yuxi.request_info IS
    'The request view: what submitting, steering, cancelling and reading a request return';

CREATE TYPE yuxi.claimed_run AS (
    run_id             uuid,
    thread_id          uuid,
    uid                uuid,
    agent_slug         text,
    request_id         text,
    run_type           text,
    created_by_run_id  uuid,
    input_message_id   bigint,
    input_payload      jsonb,
    lease_token        uuid,
    lease_expires_at   timestamptz,
    attempt_no         integer,
    started_at         timestamptz,
    manifest_fingerprint text
);
COMMENT ON TYPE yuxi.claimed_run IS
    'What yuxi.run_claim returns: the run and its new lease';

CREATE TYPE yuxi.thread_info AS (
    id             uuid,
    agent_id       text,
    project_id     uuid,
    title          text,
    thread_status  text,
    created_at     timestamptz,
    updated_at     timestamptz
);
COMMENT ON TYPE yuxi.thread_info IS
    'A thread as the API shows it; thread_status is loading, ready or done';

CREATE TYPE yuxi.occurrence_info AS (
    id             uuid,
    job_id         uuid,
    scheduled_for  timestamptz,
    trigger        text,
    status         text,
    thread_id      uuid,
    request_id     text,
    run_id         uuid,
    run_status     text,
    error          text,
    created_at     timestamptz
);
COMMENT ON TYPE yuxi.occurrence_info IS
    'A scheduled job occurrence with its run and the run''s current status';

-- =====================================================================================
-- sql/schema/03_accounts.sql

-- yuxi: users and API tokens, callable from psql as from the CLI. Tokens are never
-- stored: callers pass sha256(token).

CREATE FUNCTION yuxi.user_create(
    p_name text, p_is_admin boolean, p_token_hash bytea, p_token_name text DEFAULT 'default'
) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_uid uuid;
BEGIN
    IF p_name IS NULL OR length(btrim(p_name)) = 0 OR length(p_name) > 200 THEN
        RAISE EXCEPTION 'a user name is 1-200 characters' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    INSERT INTO yuxi.users (name, is_admin) VALUES (p_name, coalesce(p_is_admin, false))
    ON CONFLICT (name) WHERE deleted_at IS NULL DO NOTHING
    RETURNING id INTO v_uid;
    IF v_uid IS NULL THEN
        RAISE EXCEPTION 'user % already exists', p_name USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    PERFORM yuxi.token_create(v_uid, p_token_hash, p_token_name);
    RETURN v_uid;
END;
$$;
COMMENT ON FUNCTION yuxi.user_create(text, boolean, bytea, text) IS
    'Creates a user and its first API token (p_token_hash = sha256 of the token); returns the user id. Raises invalid_input (YV001) for a bad or taken name or hash';

CREATE FUNCTION yuxi.token_create(p_uid uuid, p_token_hash bytea, p_name text DEFAULT 'default')
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_id uuid;
BEGIN
    IF p_token_hash IS NULL OR length(p_token_hash) <> 32 THEN
        RAISE EXCEPTION 'a token is stored as its 32-byte sha256'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM yuxi.users WHERE id = p_uid AND deleted_at IS NULL) THEN
        RAISE EXCEPTION 'user % not found', p_uid USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    INSERT INTO yuxi.api_tokens (user_id, token_hash, name)
    VALUES (p_uid, p_token_hash, coalesce(p_name, 'default'))
    RETURNING id INTO v_id;
    RETURN v_id;
END;
$$;
COMMENT ON FUNCTION yuxi.token_create(uuid, bytea, text) IS
    'Adds an API token (p_token_hash = sha256 of the token) to a live user; returns its id. Raises invalid_input (YV001), not_found (YN001)';

-- The live user a token belongs to, or no row. last_used_at is refreshed at most once
-- a minute so authentication does not write on every request.
CREATE FUNCTION yuxi.token_authenticate(p_token_hash bytea)
RETURNS TABLE (uid uuid, name text, is_admin boolean)
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE yuxi.api_tokens t SET last_used_at = now()
    WHERE t.token_hash = p_token_hash AND t.revoked_at IS NULL
      AND (t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute');
    RETURN QUERY
    SELECT u.id, u.name, u.is_admin
    FROM yuxi.api_tokens t JOIN yuxi.users u ON u.id = t.user_id
    WHERE t.token_hash = p_token_hash AND t.revoked_at IS NULL AND u.deleted_at IS NULL;
END;
$$;
COMMENT ON FUNCTION yuxi.token_authenticate(bytea) IS
    'The live user a token hash belongs to (uid, name, is_admin), or no row; refreshes last_used_at at most once a minute';

-- Deletes a user: soft-deletes the account, revokes its tokens and removes its
-- scheduled jobs and their occurrences, in one transaction.
CREATE FUNCTION yuxi.user_delete(p_uid uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE yuxi.users SET deleted_at = now() WHERE id = p_uid AND deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'user % not found', p_uid USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    UPDATE yuxi.api_tokens SET revoked_at = now() WHERE user_id = p_uid AND revoked_at IS NULL;
    DELETE FROM yuxi.scheduled_agent_jobs WHERE uid = p_uid;  -- occurrences cascade
END;
$$;
COMMENT ON FUNCTION yuxi.user_delete(uuid) IS
    'Deletes a user: soft-deletes the account, revokes its tokens, removes its scheduled jobs and their occurrences. Raises not_found (YN001)';

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
COMMENT ON FUNCTION yuxi.user_list() IS
    'Operators: live users with their number of active tokens and last use. Never a token or its hash';

-- =====================================================================================
-- sql/schema/04_agents.sql

-- yuxi: agents, who may see them, and saving them.

-- plpgsql rather than SQL: its plan is cached, which before PostgreSQL 18 halves the
-- cost of every call (it is on the path of every submit and every run).
CREATE FUNCTION yuxi.agent_visible_to(p_slug text, p_uid uuid) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1
        FROM yuxi.agents a
        JOIN yuxi.users u ON u.id = p_uid AND u.deleted_at IS NULL
        WHERE a.slug = p_slug
          AND a.deleted_at IS NULL
          AND (a.share_scope = 'all'
               OR u.is_admin
               OR (a.share_scope = 'selected'
                   AND EXISTS (SELECT 1 FROM yuxi.agent_shares s
                               WHERE s.agent_slug = a.slug AND s.uid = p_uid)))
    );
END;
$$;
COMMENT ON FUNCTION yuxi.agent_visible_to(text, uuid) IS
    'True when the live user p_uid may see the live agent p_slug (share scope all, an admin, or shared with the user)';

-- Subagents a user can see (the default `subagents` of a chatbot).
CREATE FUNCTION yuxi.subagents_visible_to(p_uid uuid) RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    SELECT a.slug FROM yuxi.agents a
    WHERE a.is_subagent AND yuxi.agent_visible_to(a.slug, p_uid)
    ORDER BY a.slug
$$;
COMMENT ON FUNCTION yuxi.subagents_visible_to(uuid) IS
    'The slugs of the subagents a user can see, in order';

-- Agents a user can see.
CREATE FUNCTION yuxi.agents_visible(p_uid uuid)
RETURNS TABLE (slug text, name text, description text, backend_id text, config_json jsonb,
               share_scope text, is_subagent boolean, updated_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT a.slug, a.name, a.description, a.backend_id, a.config_json, a.share_scope,
           a.is_subagent, a.updated_at
    FROM yuxi.agents a
    WHERE a.deleted_at IS NULL AND yuxi.agent_visible_to(a.slug, p_uid)
    ORDER BY a.slug
$$;
COMMENT ON FUNCTION yuxi.agents_visible(uuid) IS
    'The agents a user can see, by slug';

-- Creates an agent unless one with this slug exists; true when it was created.
CREATE FUNCTION yuxi.agent_seed(
    p_slug text, p_name text, p_backend_id text, p_config jsonb DEFAULT '{"context": {}}',
    p_description text DEFAULT ''
) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_created boolean;
BEGIN
    INSERT INTO yuxi.agents (slug, name, backend_id, config_json, description)
    VALUES (p_slug, p_name, p_backend_id, coalesce(p_config, '{"context": {}}'), coalesce(p_description, ''))
    ON CONFLICT (slug) DO NOTHING
    RETURNING true INTO v_created;
    RETURN coalesce(v_created, false);
END;
$$;
COMMENT ON FUNCTION yuxi.agent_seed(text, text, text, jsonb, text) IS
    'Creates an agent unless one with this slug exists; true when it was created';

-- Creates (p_create) or updates an agent, with the users it is shared with when
-- share_scope is 'selected'. Admin-only at the API; open to operators from psql.
CREATE FUNCTION yuxi.agent_save(
    p_create boolean, p_slug text, p_name text, p_description text, p_backend_id text,
    p_config jsonb, p_share_scope text, p_shared_with uuid[], p_is_subagent boolean,
    p_max_run_attempts integer
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_slug IS NULL OR p_slug !~ '^[a-z0-9][a-z0-9_-]{0,62}$' THEN
        RAISE EXCEPTION 'an agent id is 1-63 characters of a-z, 0-9, _ and - (starting with a letter or digit)'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_name IS NULL OR p_name ~ '^[[:space:]]*$' OR length(p_name) > 200 THEN
        RAISE EXCEPTION 'an agent name is 1-200 characters' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_config IS NULL OR jsonb_typeof(p_config) <> 'object'
       OR jsonb_typeof(coalesce(p_config -> 'context', '{}')) <> 'object' THEN
        RAISE EXCEPTION 'config must be an object like {"context": {...}}'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_max_run_attempts IS NULL OR p_max_run_attempts NOT BETWEEN 1 AND 10 THEN
        RAISE EXCEPTION 'max_run_attempts must be between 1 and 10'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_create THEN
        INSERT INTO yuxi.agents (slug, name, description, backend_id, config_json, share_scope,
                                 is_subagent, max_run_attempts)
        VALUES (p_slug, p_name, coalesce(p_description, ''), p_backend_id, p_config, p_share_scope,
                coalesce(p_is_subagent, false), p_max_run_attempts)
        ON CONFLICT (slug) DO NOTHING;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'agent % already exists', p_slug USING ERRCODE = 'YQ011', HINT = 'agent_exists';
        END IF;
    ELSE
        UPDATE yuxi.agents
        SET name = p_name, description = coalesce(p_description, ''), backend_id = p_backend_id,
            config_json = p_config, share_scope = p_share_scope,
            is_subagent = coalesce(p_is_subagent, false), max_run_attempts = p_max_run_attempts,
            updated_at = now()
        WHERE slug = p_slug AND deleted_at IS NULL;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'agent % not found', p_slug USING ERRCODE = 'YN001', HINT = 'not_found';
        END IF;
        DELETE FROM yuxi.agent_shares WHERE agent_slug = p_slug;
    END IF;
    INSERT INTO yuxi.agent_shares (agent_slug, uid)
    SELECT p_slug, u.id FROM yuxi.users u
    WHERE u.id = ANY (coalesce(p_shared_with, '{}')) AND u.deleted_at IS NULL
    ON CONFLICT DO NOTHING;
END;
$$;
COMMENT ON FUNCTION yuxi.agent_save(boolean, text, text, text, text, jsonb, text, uuid[], boolean, integer) IS
    'Creates (p_create) or updates an agent and the users it is shared with. Raises invalid_input (YV001), agent_exists (YQ011), not_found (YN001)';

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
COMMENT ON FUNCTION yuxi.agent_list() IS
    'Operators: every agent, deleted ones included, with the live users it is shared with';

-- =====================================================================================
-- sql/schema/05_projects.sql

-- yuxi: projects, a user's working directories.

CREATE FUNCTION yuxi.project_create(p_uid uuid, p_name text, p_workdir_path text)
RETURNS yuxi.projects
LANGUAGE plpgsql AS $$
DECLARE
    v_project yuxi.projects;
BEGIN
    IF p_name IS NULL OR length(btrim(p_name)) = 0 OR length(p_name) > 200 THEN
        RAISE EXCEPTION 'a project name is 1-200 characters' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    INSERT INTO yuxi.projects (uid, name, workdir_path) VALUES (p_uid, p_name, p_workdir_path)
    RETURNING * INTO v_project;
    RETURN v_project;
END;
$$;
COMMENT ON FUNCTION yuxi.project_create(uuid, text, text) IS
    'Creates a project of a user; returns the row. Raises invalid_input (YV001) for a bad name';

-- The user's live projects, oldest first.
CREATE FUNCTION yuxi.project_list(p_uid uuid) RETURNS SETOF yuxi.projects
LANGUAGE sql STABLE AS $$
    SELECT * FROM yuxi.projects
    WHERE uid = p_uid AND deleted_at IS NULL
    ORDER BY created_at, id
$$;
COMMENT ON FUNCTION yuxi.project_list(uuid) IS
    'The user''s live projects, oldest first (created_at, id)';

-- =====================================================================================
-- sql/schema/06_threads.sql

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
CREATE FUNCTION yuxi.thread_info_of(c yuxi.conversations) RETURNS yuxi.thread_info
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (c.thread_id, c.agent_slug, c.project_id, c.title,
            yuxi.thread_status_of(c.last_run_id, c.last_viewed_run_id), c.created_at,
            c.updated_at)::yuxi.thread_info;
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

-- =====================================================================================
-- sql/schema/07_requests.sql

-- yuxi: requests, the per-conversation FIFO queue: submitting, steering, cancelling,
-- reading. Conventions (error codes, lock order, p_uid, p_now): 00_vocabulary.sql.
--
-- The small helpers on the submit path are PL/pgSQL rather than SQL: a SQL function
-- that PostgreSQL cannot inline into its caller (it reads tables, or is called from
-- PL/pgSQL) is parsed and planned again on every call before PostgreSQL 18, PL/pgSQL
-- keeps its plans for the session (request_view, called by every submit, 84 µs per call
-- as SQL against 8.5 µs as PL/pgSQL on PostgreSQL 15).

-- 1-based place in the thread's queue (a pending steer first, then created_at, id);
-- NULL once the request has left the queue.
CREATE FUNCTION yuxi.request_queue_position(p_req yuxi.agent_run_requests)
RETURNS integer
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_req.status <> 'queued' THEN
        RETURN NULL;
    ELSIF p_req.queue_policy = 'steer' THEN
        RETURN 1;
    END IF;
    RETURN 1 + (SELECT count(*)::integer FROM yuxi.agent_run_requests q
                WHERE q.thread_id = p_req.thread_id AND q.status = 'queued'
                  AND (q.queue_policy = 'steer'
                       OR (q.created_at, q.id) < (p_req.created_at, p_req.id)));
END;
$$;
COMMENT ON FUNCTION yuxi.request_queue_position(yuxi.agent_run_requests) IS
    'Internal: the 1-based queue position of a request row (a pending steer first), NULL once it left the queue';

-- The request view of any request, without an owner check (NULL for an unknown id).
CREATE FUNCTION yuxi.request_view(p_request_id text) RETURNS yuxi.request_info
LANGUAGE plpgsql STABLE AS $$
DECLARE
    r yuxi.agent_run_requests;
BEGIN
    SELECT * INTO r FROM yuxi.agent_run_requests WHERE request_id = p_request_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN (r.request_id, r.thread_id, r.status, r.queue_policy,
            yuxi.request_queue_position(r), r.input_message_id, r.dispatched_run_id,
            r.created_at)::yuxi.request_info;
END;
$$;
COMMENT ON FUNCTION yuxi.request_view(text) IS
    'Internal: the request view of any request, without an owner check (NULL fields for an unknown id); prefer yuxi.request_get';

-- The request view for its owner (p_uid) or an operator (NULL); not_found otherwise.
CREATE FUNCTION yuxi.request_get(p_request_id text, p_uid uuid DEFAULT NULL) RETURNS yuxi.request_info
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM yuxi.agent_run_requests
                   WHERE request_id = p_request_id AND (p_uid IS NULL OR uid = p_uid)) THEN
        RAISE EXCEPTION 'request % not found', p_request_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN yuxi.request_view(p_request_id);
END;
$$;
COMMENT ON FUNCTION yuxi.request_get(text, uuid) IS
    'The request view for its owner (p_uid) or an operator (NULL). Raises not_found (YN001)';

-- The checks of yuxi.request_submit that need no lock: each raises invalid_input.
CREATE FUNCTION yuxi.request_check_input(
    p_query text, p_request_id text, p_queue_policy text, p_tool_approval_mode text, p_source text
) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_queue_policy IS NULL OR p_queue_policy NOT IN ('enqueue', 'reject', 'steer') THEN
        RAISE EXCEPTION 'queue_policy must be enqueue, reject or steer, not %', coalesce(p_queue_policy, 'null')
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_query IS NULL OR p_query ~ '^[[:space:]]*$' THEN
        RAISE EXCEPTION 'query must not be empty' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_tool_approval_mode IS NOT NULL AND p_tool_approval_mode NOT IN ('auto', 'ask') THEN
        RAISE EXCEPTION 'tool_approval_mode must be auto or ask, not %', p_tool_approval_mode
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_request_id IS NOT NULL AND NOT yuxi.request_id_is_valid(p_request_id) THEN
        RAISE EXCEPTION 'request_id must be 1-128 characters of letters, digits and . _ : - (starting with a letter or digit)'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF p_source IS NULL OR p_source NOT IN ('api', 'schedule', 'psql') THEN
        RAISE EXCEPTION 'source must be api, schedule or psql, not %', coalesce(p_source, 'null')
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.request_check_input(text, text, text, text, text) IS
    'Internal: the checks of yuxi.request_submit that need no lock. Raises invalid_input (YV001)';

-- The model a run uses, the first of: the request's explicit value, the conversation's
-- saved value, the agent's config (context.model), the model inherited from a parent
-- run, the system default. Intake passes the first three (a request: explicit, then
-- saved, then agent); a subagent run passes its agent's config and its parent's model
-- (agent, then parent). Empty strings count as unset, except a saved value (only an
-- explicit non-empty value is ever saved).
CREATE FUNCTION yuxi.model_resolve(
    p_agent_config jsonb, p_explicit text DEFAULT NULL, p_saved text DEFAULT NULL,
    p_inherited text DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce(nullif(p_explicit, ''), p_saved,
                    nullif(p_agent_config #>> '{context,model}', ''), p_inherited,
                    (SELECT value FROM yuxi.system_settings WHERE key = 'default_model'));
END;
$$;
COMMENT ON FUNCTION yuxi.model_resolve(jsonb, text, text, text) IS
    'Internal: the model a run uses, the first of: explicit value, saved value, agent config (context.model), inherited value, system default';

-- A submitted request's input_payload, {model_spec, tool_approval_mode}, resolved once
-- at intake and copied to its run. The approval mode: the request's value, the agent's
-- config, the system default, auto.
CREATE FUNCTION yuxi.request_input(
    p_conv yuxi.conversations, p_model_spec text, p_tool_approval_mode text
) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_config jsonb;
BEGIN
    SELECT config_json INTO v_config FROM yuxi.agents WHERE slug = p_conv.agent_slug;
    RETURN jsonb_build_object(
        'model_spec', yuxi.model_resolve(v_config, p_model_spec, p_conv.model_spec),
        'tool_approval_mode', coalesce(
            p_tool_approval_mode,
            nullif(v_config #>> '{context,tool_approval_mode}', ''),
            (SELECT value FROM yuxi.system_settings WHERE key = 'default_tool_approval_mode'),
            'auto'));
END;
$$;
COMMENT ON FUNCTION yuxi.request_input(yuxi.conversations, text, text) IS
    'Internal: the input_payload {model_spec, tool_approval_mode} of a request submitted to the locked conversation p_conv';

-- The one submit path, for the API, the scheduler and psql alike: input checks, the
-- conversation lock, idempotency, then yuxi.request_submit_locked.
CREATE FUNCTION yuxi.request_submit(
    p_uid                 uuid,
    p_thread_id           uuid,
    p_query               text,
    p_request_id          text DEFAULT NULL,
    p_queue_policy        text DEFAULT 'enqueue',
    p_model_spec          text DEFAULT NULL,
    p_tool_approval_mode  text DEFAULT NULL,
    p_source              text DEFAULT 'api'
) RETURNS yuxi.request_info
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
    v_existing yuxi.agent_run_requests;
BEGIN
    PERFORM yuxi.request_check_input(p_query, p_request_id, p_queue_policy, p_tool_approval_mode,
                                     p_source);
    v_conv := yuxi.thread_lock(p_uid, p_thread_id);

    -- Idempotency first: a re-sent request is returned as it is now, whatever the
    -- thread's state, and is never delivered twice.
    IF p_request_id IS NOT NULL THEN
        SELECT * INTO v_existing FROM yuxi.agent_run_requests WHERE request_id = p_request_id;
        IF FOUND THEN
            IF v_existing.thread_id <> v_conv.thread_id OR v_existing.uid <> v_conv.uid
               OR v_existing.source = 'resume' THEN
                RAISE EXCEPTION 'request_id % is already used for another request', p_request_id
                    USING ERRCODE = 'YQ001', HINT = 'request_id_conflict';
            END IF;
            RETURN yuxi.request_view(p_request_id);
        END IF;
    END IF;
    RETURN yuxi.request_submit_locked(v_conv, coalesce(p_request_id, gen_random_uuid()::text),
                                      p_query, p_queue_policy, p_model_spec, p_tool_approval_mode,
                                      p_source);
END;
$$;
COMMENT ON FUNCTION yuxi.request_submit(uuid, uuid, text, text, text, text, text, text) IS
    'The one submit path: stores a user message as a request in the thread''s queue and dispatches it when the thread is idle; a re-sent request_id returns the request as it is. Raises invalid_input (YV001), not_found (YN001), request_id_conflict (YQ001), run_interrupted (YQ002), steer_already_pending (YQ007), run_not_steerable (YQ008)';

-- The locked core of yuxi.request_submit: p_conv is locked and p_request_id is new.
-- Decides from the thread's state what becomes of the request, then writes the user
-- message, the request and, when the thread is idle with nothing queued, the run that
-- serves it at once.
CREATE FUNCTION yuxi.request_submit_locked(
    p_conv yuxi.conversations, p_request_id text, p_query text, p_queue_policy text,
    p_model_spec text, p_tool_approval_mode text, p_source text
) RETURNS yuxi.request_info
LANGUAGE plpgsql AS $$
DECLARE
    v_last_status text;
    v_busy boolean;
    v_backlog boolean;
    v_status text := 'queued';
    v_input jsonb;
    v_msg_id bigint;
    v_run_id uuid;
    v_created_at timestamptz;
BEGIN
    SELECT status INTO v_last_status FROM yuxi.agent_runs WHERE run_id = p_conv.last_run_id;
    IF v_last_status = 'interrupted' THEN
        RAISE EXCEPTION 'thread % is waiting for run % to be resumed', p_conv.thread_id, p_conv.last_run_id
            USING ERRCODE = 'YQ002', HINT = 'run_interrupted';
    END IF;
    v_busy := coalesce(yuxi.run_is_active(v_last_status), false);
    v_backlog := EXISTS (SELECT 1 FROM yuxi.agent_run_requests
                         WHERE thread_id = p_conv.thread_id AND status = 'queued');

    IF p_queue_policy = 'reject' AND (v_busy OR v_backlog OR p_conv.paused_by_run_id IS NOT NULL) THEN
        v_status := 'rejected';
    ELSIF p_queue_policy = 'steer' AND NOT v_busy AND p_conv.paused_by_run_id IS NOT NULL THEN
        RAISE EXCEPTION 'thread %''s backlog is paused by run %; continue or cancel it before steering',
            p_conv.thread_id, p_conv.paused_by_run_id
            USING ERRCODE = 'YQ008', HINT = 'run_not_steerable';
    ELSIF p_queue_policy = 'steer' AND EXISTS (
            SELECT 1 FROM yuxi.agent_run_requests
            WHERE thread_id = p_conv.thread_id AND status = 'queued' AND queue_policy = 'steer') THEN
        RAISE EXCEPTION 'thread % already has a pending steer request', p_conv.thread_id
            USING ERRCODE = 'YQ007', HINT = 'steer_already_pending';
    END IF;

    v_input := yuxi.request_input(p_conv, p_model_spec, p_tool_approval_mode);

    -- An idle thread with nothing queued dispatches this request at once: it is the head.
    -- Its rows are written dispatched from the start, each once.
    IF v_status = 'queued' AND NOT v_busy AND NOT v_backlog AND p_conv.paused_by_run_id IS NULL THEN
        v_status := 'dispatched';
        v_run_id := gen_random_uuid();
    END IF;

    v_msg_id := nextval('yuxi.messages_id_seq');
    -- ON CONFLICT: the same request_id racing in on another thread or user (this
    -- thread's submits are serialised by the conversation lock).
    INSERT INTO yuxi.agent_run_requests (request_id, uid, thread_id, source, queue_policy, status,
                                         input_message_id, dispatched_run_id, input_payload)
    VALUES (p_request_id, p_conv.uid, p_conv.thread_id, p_source, p_queue_policy, v_status, v_msg_id,
            v_run_id, v_input)
    ON CONFLICT (request_id) DO NOTHING
    RETURNING created_at INTO v_created_at;
    IF v_created_at IS NULL THEN
        RAISE EXCEPTION 'request_id % is already used for another request', p_request_id
            USING ERRCODE = 'YQ001', HINT = 'request_id_conflict';
    END IF;
    INSERT INTO yuxi.messages (id, thread_id, role, content, request_id, delivery_status, run_id)
    VALUES (v_msg_id, p_conv.thread_id, 'user', p_query, p_request_id,
            CASE v_status WHEN 'queued' THEN 'queued' WHEN 'rejected' THEN 'rejected' ELSE 'dispatched' END,
            v_run_id);
    IF v_run_id IS NOT NULL THEN
        INSERT INTO yuxi.agent_runs (run_id, thread_id, uid, agent_slug, request_id, run_type,
                                     input_message_id, input_payload, delivery_job_id)
        VALUES (v_run_id, p_conv.thread_id, p_conv.uid, p_conv.agent_slug, p_request_id, 'chat', v_msg_id,
                v_input, yuxi.run_delivery_job(v_run_id, true));
    END IF;

    UPDATE yuxi.conversations
    SET model_spec = coalesce(nullif(p_model_spec, ''), model_spec),
        last_run_id = coalesce(v_run_id, last_run_id), updated_at = clock_timestamp()
    WHERE thread_id = p_conv.thread_id;

    IF v_status = 'queued' AND NOT v_busy AND p_conv.paused_by_run_id IS NULL THEN
        -- a stalled backlog (idle, unpaused, yet queued; only reachable by hand): its
        -- oldest request goes first
        PERFORM yuxi.thread_dispatch_head(p_conv);
        RETURN yuxi.request_view(p_request_id);
    END IF;
    RETURN ROW(p_request_id, p_conv.thread_id, v_status, p_queue_policy,
               CASE WHEN v_status = 'queued'
                    THEN yuxi.request_queue_position(
                             (SELECT r FROM yuxi.agent_run_requests r WHERE r.request_id = p_request_id))
               END,
               v_msg_id, v_run_id, v_created_at)::yuxi.request_info;
END;
$$;
COMMENT ON FUNCTION yuxi.request_submit_locked(yuxi.conversations, text, text, text, text, text, text) IS
    'Internal: the locked core of yuxi.request_submit (p_conv locked, p_request_id new). Raises request_id_conflict (YQ001), run_interrupted (YQ002), steer_already_pending (YQ007), run_not_steerable (YQ008)';

-- Upgrades a queued enqueue request to steer: same identity, runs next.
CREATE FUNCTION yuxi.request_steer(p_request_id text, p_uid uuid DEFAULT NULL) RETURNS yuxi.request_info
LANGUAGE plpgsql AS $$
DECLARE
    v_req yuxi.agent_run_requests;
    v_conv yuxi.conversations;
BEGIN
    SELECT * INTO v_req FROM yuxi.agent_run_requests
    WHERE request_id = p_request_id AND (p_uid IS NULL OR uid = p_uid);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'request % not found', p_request_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    v_conv := yuxi.thread_lock(p_uid, v_req.thread_id);
    SELECT * INTO v_req FROM yuxi.agent_run_requests WHERE request_id = p_request_id FOR UPDATE;

    IF v_req.status = 'dispatched' THEN
        RAISE EXCEPTION 'request % is already dispatched as run %', p_request_id, v_req.dispatched_run_id
            USING ERRCODE = 'YQ006', HINT = 'request_already_dispatched';
    ELSIF v_req.status <> 'queued' THEN
        RAISE EXCEPTION 'request % is %, not queued', p_request_id, v_req.status
            USING ERRCODE = 'YQ008', HINT = 'run_not_steerable';
    ELSIF v_req.queue_policy = 'steer' THEN
        RETURN yuxi.request_view(p_request_id);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM yuxi.agent_runs WHERE run_id = v_conv.last_run_id
                   AND yuxi.run_is_active(status)) THEN
        RAISE EXCEPTION 'no run is active on thread %; steering needs one', v_req.thread_id
            USING ERRCODE = 'YQ008', HINT = 'run_not_steerable';
    END IF;
    IF EXISTS (SELECT 1 FROM yuxi.agent_run_requests
               WHERE thread_id = v_req.thread_id AND status = 'queued' AND queue_policy = 'steer') THEN
        RAISE EXCEPTION 'thread % already has a pending steer request', v_req.thread_id
            USING ERRCODE = 'YQ007', HINT = 'steer_already_pending';
    END IF;
    UPDATE yuxi.agent_run_requests SET queue_policy = 'steer', updated_at = clock_timestamp()
    WHERE request_id = p_request_id;
    RETURN yuxi.request_view(p_request_id);
END;
$$;
COMMENT ON FUNCTION yuxi.request_steer(text, uuid) IS
    'Upgrades a queued enqueue request to steer (runs next, same identity). Raises not_found (YN001), request_already_dispatched (YQ006), steer_already_pending (YQ007), run_not_steerable (YQ008)';

-- Cancels a request that is still queued. Cancelling the last queued request of a
-- paused backlog un-pauses the thread: there is nothing left to hold back.
CREATE FUNCTION yuxi.request_cancel(p_request_id text, p_uid uuid DEFAULT NULL) RETURNS yuxi.request_info
LANGUAGE plpgsql AS $$
DECLARE
    v_req yuxi.agent_run_requests;
BEGIN
    SELECT * INTO v_req FROM yuxi.agent_run_requests
    WHERE request_id = p_request_id AND (p_uid IS NULL OR uid = p_uid);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'request % not found', p_request_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    PERFORM yuxi.thread_lock(p_uid, v_req.thread_id);
    SELECT * INTO v_req FROM yuxi.agent_run_requests WHERE request_id = p_request_id FOR UPDATE;

    IF v_req.status = 'dispatched' THEN
        RAISE EXCEPTION 'request % is already dispatched as run %; cancel the run instead',
            p_request_id, v_req.dispatched_run_id
            USING ERRCODE = 'YQ006', HINT = 'request_already_dispatched';
    ELSIF v_req.status = 'queued' THEN
        UPDATE yuxi.agent_run_requests SET status = 'cancelled', updated_at = clock_timestamp()
        WHERE request_id = p_request_id;
        UPDATE yuxi.messages SET delivery_status = 'cancelled' WHERE id = v_req.input_message_id;
        UPDATE yuxi.conversations SET paused_by_run_id = NULL, updated_at = clock_timestamp()
        WHERE thread_id = v_req.thread_id AND paused_by_run_id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM yuxi.agent_run_requests
                          WHERE thread_id = v_req.thread_id AND status = 'queued');
    END IF;
    RETURN yuxi.request_view(p_request_id);
END;
$$;
COMMENT ON FUNCTION yuxi.request_cancel(text, uuid) IS
    'Cancels a queued request (un-pausing a backlog left empty); returns the request view. Raises not_found (YN001), request_already_dispatched (YQ006)';

-- The requests of a thread, oldest first, as request views.
CREATE FUNCTION yuxi.thread_requests(p_uid uuid, p_thread_id uuid) RETURNS SETOF yuxi.request_info
LANGUAGE sql STABLE AS $$
    SELECT r.request_id, r.thread_id, r.status, r.queue_policy, yuxi.request_queue_position(r),
           r.input_message_id, r.dispatched_run_id, r.created_at
    FROM yuxi.agent_run_requests r
    JOIN yuxi.conversations c ON c.thread_id = r.thread_id
    WHERE r.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active'
    ORDER BY r.created_at, r.id
$$;
COMMENT ON FUNCTION yuxi.thread_requests(uuid, uuid) IS
    'The requests of the user''s thread, oldest first, as request views';

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
           OR NOT yuxi.run_is_final(ar.status))
    ORDER BY r.status = 'queued', yuxi.request_queue_position(r),
             coalesce(ar.created_at, r.created_at), r.id
$$;
COMMENT ON FUNCTION yuxi.thread_queue_requests(uuid, boolean) IS
    'Operators: a thread''s requests in dispatch order with positions, run status and text; without p_all only queued ones and those whose run is not final';

-- =====================================================================================
-- sql/schema/08_runs.sql

-- yuxi: runs: reading one, what a worker reads to execute it, its lease, ending it,
-- cancelling, resuming, child runs, and the reconciliation of expired leases.
-- Conventions (error codes, lock order, p_uid, p_now): 00_vocabulary.sql.
--
-- A worker preparing a run reads the database once (run_execution_input also returns
-- the subagents the run's user can see) and commits the manifest and re-reads the run's
-- identity in one call (run_commit_manifest): the executor's last check before the
-- graph starts.

-- ---------------------------------------------------------------------------------
-- Reading

-- A run for its owner (p_uid) or an operator (NULL); not_found otherwise.
CREATE FUNCTION yuxi.run_get(p_run_id uuid, p_uid uuid DEFAULT NULL) RETURNS yuxi.agent_runs
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_run yuxi.agent_runs;
BEGIN
    SELECT * INTO v_run FROM yuxi.agent_runs WHERE run_id = p_run_id AND (p_uid IS NULL OR uid = p_uid);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % not found', p_run_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN v_run;
END;
$$;
COMMENT ON FUNCTION yuxi.run_get(uuid, uuid) IS
    'A run for its owner (p_uid) or an operator (NULL). Raises not_found (YN001)';

-- Everything the executor needs about a run, its conversation, agent and project, in
-- one read. `identity_error` is NULL when the run may execute, else why it may not:
-- the run needs a live conversation that belongs to the run's user and is bound to the
-- run's agent (subagent runs: the parent's conversation), and an agent the user can see.
CREATE FUNCTION yuxi.run_execution_input(p_run_id uuid)
RETURNS TABLE (
    run_id             uuid,
    thread_id          uuid,
    uid                uuid,
    request_id         text,
    run_type           text,
    created_by_run_id  uuid,
    agent_slug         text,
    backend_id         text,
    agent_config       jsonb,
    agent_updated_at   timestamptz,
    project_id         uuid,
    workdir_path       text,
    input_text         text,
    input_payload      jsonb,
    identity_error     text,
    visible_subagents  text[]
)
LANGUAGE sql STABLE AS $$
    SELECT r.run_id, r.thread_id, r.uid, r.request_id, r.run_type, r.created_by_run_id,
           r.agent_slug, a.backend_id, a.config_json, a.updated_at, c.project_id, p.workdir_path,
           m.content, r.input_payload,
           CASE
               WHEN r.thread_id IS NULL OR r.request_id IS NULL OR r.request_id = '' THEN
                   'the run has no thread or request identity'
               WHEN c.thread_id IS NULL OR c.status <> 'active' THEN
                   format('conversation %s no longer exists', r.thread_id)
               WHEN c.uid <> r.uid THEN
                   format('conversation %s does not belong to the run''s user', r.thread_id)
               WHEN r.run_type <> 'subagent' AND c.agent_slug <> r.agent_slug THEN
                   format('conversation %s is bound to agent %s, not %s', r.thread_id, c.agent_slug, r.agent_slug)
               WHEN a.slug IS NULL OR NOT yuxi.agent_visible_to(r.agent_slug, r.uid) THEN
                   format('agent %s is not available to the run''s user', r.agent_slug)
               WHEN c.project_id IS NOT NULL AND (p.id IS NULL OR p.deleted_at IS NOT NULL) THEN
                   format('project %s of conversation %s no longer exists', c.project_id, r.thread_id)
           END,
           ARRAY(SELECT s FROM yuxi.subagents_visible_to(r.uid) s)
    FROM yuxi.agent_runs r
    LEFT JOIN yuxi.conversations c ON c.thread_id = r.thread_id
    LEFT JOIN yuxi.agents a ON a.slug = r.agent_slug AND a.deleted_at IS NULL
    LEFT JOIN yuxi.projects p ON p.id = c.project_id
    LEFT JOIN yuxi.messages m ON m.id = r.input_message_id
    WHERE r.run_id = p_run_id
$$;
COMMENT ON FUNCTION yuxi.run_execution_input(uuid) IS
    'Worker: everything needed to execute a run, in one read; identity_error says why the run may not execute (NULL when it may)';

-- ---------------------------------------------------------------------------------
-- Leases

-- Claims a pending run: a new attempt with a fresh lease token. A duplicate delivery
-- finds the run no longer pending and gets run_not_claimable; nothing runs twice.
CREATE FUNCTION yuxi.run_claim(
    p_run_id uuid, p_worker text, p_lease_seconds double precision, p_now timestamptz DEFAULT NULL
) RETURNS yuxi.claimed_run
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_token uuid := gen_random_uuid();
    v_run yuxi.agent_runs;
    v_status text;
BEGIN
    IF p_lease_seconds IS NULL OR p_lease_seconds <= 0 THEN
        RAISE EXCEPTION 'lease must be positive' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    UPDATE yuxi.agent_runs
    SET status = 'running', lease_token = v_token, lease_owner = p_worker,
        lease_expires_at = v_now + make_interval(secs => p_lease_seconds), heartbeat_at = v_now,
        attempt_count = attempt_count + 1, started_at = coalesce(started_at, v_now), updated_at = v_now
    WHERE run_id = p_run_id AND status = 'pending'
    RETURNING * INTO v_run;
    IF NOT FOUND THEN
        SELECT status INTO v_status FROM yuxi.agent_runs WHERE run_id = p_run_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'run % not found', p_run_id USING ERRCODE = 'YN001', HINT = 'not_found';
        END IF;
        RAISE EXCEPTION 'run % is %, not pending', p_run_id, v_status
            USING ERRCODE = 'YQ010', HINT = 'run_not_claimable';
    END IF;
    INSERT INTO yuxi.agent_run_attempts (run_id, attempt_no, worker, lease_token, started_at)
    VALUES (p_run_id, v_run.attempt_count, p_worker, v_token, v_now);
    RETURN ROW(v_run.run_id, v_run.thread_id, v_run.uid, v_run.agent_slug, v_run.request_id,
               v_run.run_type, v_run.created_by_run_id, v_run.input_message_id, v_run.input_payload,
               v_token, v_run.lease_expires_at, v_run.attempt_count, v_run.started_at,
               v_run.manifest_fingerprint)::yuxi.claimed_run;
END;
$$;
COMMENT ON FUNCTION yuxi.run_claim(uuid, text, double precision, timestamptz) IS
    'Worker: claims a pending run under a new lease and attempt. Raises invalid_input (YV001), not_found (YN001), run_not_claimable (YQ010)';

-- Raises lease_lost unless p_token holds an unexpired lease on the locked run p_run.
CREATE FUNCTION yuxi.lease_check(p_run yuxi.agent_runs, p_token uuid, p_now timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT yuxi.run_is_leased(p_run.status) OR p_run.lease_token IS DISTINCT FROM p_token
       OR p_run.lease_expires_at <= p_now THEN
        RAISE EXCEPTION 'lease on run % is lost (run is %)', p_run.run_id, p_run.status
            USING ERRCODE = 'YL001', HINT = 'lease_lost';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.lease_check(yuxi.agent_runs, uuid, timestamptz) IS
    'Internal: raises lease_lost (YL001) unless p_token holds an unexpired lease on the locked run p_run';

-- Locks a run for its lease holder, or raises lease_lost.
CREATE FUNCTION yuxi.run_lock_leased(p_run_id uuid, p_token uuid, p_now timestamptz)
RETURNS yuxi.agent_runs
LANGUAGE plpgsql AS $$
DECLARE
    v_run yuxi.agent_runs;
BEGIN
    SELECT * INTO v_run FROM yuxi.agent_runs WHERE run_id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % not found', p_run_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    PERFORM yuxi.lease_check(v_run, p_token, p_now);
    RETURN v_run;
END;
$$;
COMMENT ON FUNCTION yuxi.run_lock_leased(uuid, uuid, timestamptz) IS
    'Internal: locks a run for its lease holder. Raises not_found (YN001), lease_lost (YL001)';

-- Extends the lease. Returns the run's status so the holder learns of a cancel request
-- on the same round trip.
CREATE FUNCTION yuxi.run_renew_lease(
    p_run_id uuid, p_token uuid, p_lease_seconds double precision, p_now timestamptz DEFAULT NULL,
    OUT status text, OUT lease_expires_at timestamptz
)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
BEGIN
    IF p_lease_seconds IS NULL OR p_lease_seconds <= 0 THEN
        RAISE EXCEPTION 'lease must be positive' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    UPDATE yuxi.agent_runs r
    SET lease_expires_at = v_now + make_interval(secs => p_lease_seconds), heartbeat_at = v_now,
        updated_at = v_now
    WHERE r.run_id = p_run_id AND r.lease_token = p_token AND r.lease_expires_at > v_now
      AND yuxi.run_is_leased(r.status)
    RETURNING r.status, r.lease_expires_at INTO status, lease_expires_at;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'lease on run % is lost', p_run_id USING ERRCODE = 'YL001', HINT = 'lease_lost';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.run_renew_lease(uuid, uuid, double precision, timestamptz) IS
    'Worker: extends the lease; returns the run''s status (cancel_requested tells the holder to stop). Raises invalid_input (YV001), lease_lost (YL001)';

-- Write-once: the first fingerprint stays; an equal one is accepted (a retry that
-- derived the same manifest); a different one raises and changes nothing.
CREATE FUNCTION yuxi.run_write_manifest(
    p_run_id uuid, p_token uuid, p_manifest jsonb, p_fingerprint text, p_now timestamptz DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_run yuxi.agent_runs;
BEGIN
    IF p_manifest IS NULL OR p_fingerprint IS NULL OR p_fingerprint !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'manifest and a sha-256 hex fingerprint are required'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_run := yuxi.run_lock_leased(p_run_id, p_token, coalesce(p_now, clock_timestamp()));
    IF v_run.manifest_fingerprint IS NULL THEN
        UPDATE yuxi.agent_runs SET manifest = p_manifest, manifest_fingerprint = p_fingerprint
        WHERE run_id = p_run_id;
    ELSIF v_run.manifest_fingerprint <> p_fingerprint THEN
        RAISE EXCEPTION 'run % already has manifest %; this attempt derived %',
            p_run_id, v_run.manifest_fingerprint, p_fingerprint
            USING ERRCODE = 'YM001', HINT = 'manifest_conflict';
    END IF;
    RETURN coalesce(v_run.manifest_fingerprint, p_fingerprint);
END;
$$;
COMMENT ON FUNCTION yuxi.run_write_manifest(uuid, uuid, jsonb, text, timestamptz) IS
    'Worker: stores the run''s manifest once; an equal fingerprint is accepted again. Raises invalid_input (YV001), lease_lost (YL001), manifest_conflict (YM001)';

-- Writes the manifest as yuxi.run_write_manifest does (under the lease, write-once) and
-- then reads the run's identity again, as it stands now that preparation is over: a
-- conversation deleted, an agent hidden or its backend changed meanwhile shows here.
CREATE FUNCTION yuxi.run_commit_manifest(
    p_run_id uuid, p_token uuid, p_manifest jsonb, p_fingerprint text
) RETURNS TABLE (fingerprint text, identity_error text, backend_id text)
LANGUAGE plpgsql AS $$
BEGIN
    fingerprint := yuxi.run_write_manifest(p_run_id, p_token, p_manifest, p_fingerprint);
    SELECT i.identity_error, i.backend_id INTO identity_error, backend_id
    FROM yuxi.run_execution_input(p_run_id) i;
    RETURN NEXT;
END;
$$;
COMMENT ON FUNCTION yuxi.run_commit_manifest(uuid, uuid, jsonb, text) IS
    'Worker: yuxi.run_write_manifest, then the run''s identity_error and backend as they stand now. Raises as yuxi.run_write_manifest';

-- ---------------------------------------------------------------------------------
-- Ending runs

-- Locks a run's conversation (top-level runs) and then the run, in the global order.
CREATE FUNCTION yuxi.run_lock(p_run_id uuid, p_uid uuid DEFAULT NULL) RETURNS yuxi.agent_runs
LANGUAGE plpgsql AS $$
DECLARE
    v_run yuxi.agent_runs;
BEGIN
    SELECT * INTO v_run FROM yuxi.agent_runs WHERE run_id = p_run_id AND (p_uid IS NULL OR uid = p_uid);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % not found', p_run_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    PERFORM 1 FROM yuxi.conversations WHERE thread_id = v_run.thread_id FOR UPDATE;
    SELECT * INTO v_run FROM yuxi.agent_runs WHERE run_id = p_run_id FOR UPDATE;
    RETURN v_run;
END;
$$;
COMMENT ON FUNCTION yuxi.run_lock(uuid, uuid) IS
    'Internal: locks a run''s conversation, then the run (the global lock order). Raises not_found (YN001)';

-- Everything that follows a run reaching a terminal or interrupted status, in the same
-- transaction: the single `end` event, the input message's delivery status, the run's
-- children, and the thread's queue (dispatch the next request, or pause the backlog).
-- p_run is the run as just updated by the caller, which holds the conversation lock
-- (top-level runs) and the run lock, and reserved the end event's seq by incrementing
-- last_event_seq in that same update. An interrupted run already wrote its `end` when
-- it stopped; cancelling it later only releases the thread (p_was_interrupted).
CREATE FUNCTION yuxi.run_settle(
    p_run yuxi.agent_runs, p_was_interrupted boolean DEFAULT false, p_notify boolean DEFAULT true
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_conv yuxi.conversations;
    v_next uuid;
BEGIN
    IF p_was_interrupted THEN
        UPDATE yuxi.messages SET delivery_status = 'cancelled'
        WHERE id = p_run.input_message_id AND role = 'user';
    ELSE
        INSERT INTO yuxi.run_events (run_id, seq, event, payload)
        VALUES (p_run.run_id, p_run.last_event_seq, 'end',
                jsonb_strip_nulls(jsonb_build_object(
                    'status', p_run.status, 'error_type', p_run.error_type,
                    'error_message', p_run.error_message, 'output_message_id', p_run.output_message_id)));
        IF p_notify THEN
            PERFORM pg_notify('yuxi_run_events', p_run.run_id::text || ' ' || p_run.last_event_seq::text);
        END IF;
        UPDATE yuxi.messages
        SET delivery_status = CASE p_run.status
                WHEN 'failed' THEN 'failed' WHEN 'cancelled' THEN 'cancelled' ELSE 'complete' END
        WHERE id = p_run.input_message_id AND role = 'user';
    END IF;

    -- Children do not outlive a parent that has ended.
    IF yuxi.run_is_final(p_run.status) THEN
        PERFORM yuxi.run_request_cancel(c.run_id, NULL, p_run.finished_at)
        FROM yuxi.agent_runs c
        WHERE c.created_by_run_id = p_run.run_id AND c.run_type = 'subagent'
          AND yuxi.run_is_cancellable(c.status);
    END IF;

    IF p_run.run_type = 'subagent' THEN
        RETURN;
    END IF;
    SELECT * INTO v_conv FROM yuxi.conversations WHERE thread_id = p_run.thread_id;
    IF p_run.status = 'completed' AND v_conv.paused_by_run_id IS NULL THEN
        v_next := yuxi.thread_dispatch_head(v_conv);  -- also touches updated_at
        IF v_next IS NOT NULL THEN
            RETURN;
        END IF;
    ELSIF p_run.status IN ('failed', 'cancelled')
          AND EXISTS (SELECT 1 FROM yuxi.agent_run_requests
                      WHERE thread_id = p_run.thread_id AND status = 'queued') THEN
        UPDATE yuxi.conversations SET paused_by_run_id = p_run.run_id, updated_at = clock_timestamp()
        WHERE thread_id = p_run.thread_id;
        RETURN;
    END IF;
    UPDATE yuxi.conversations SET updated_at = clock_timestamp() WHERE thread_id = p_run.thread_id;
END;
$$;
COMMENT ON FUNCTION yuxi.run_settle(yuxi.agent_runs, boolean, boolean) IS
    'Internal: what follows a run reaching an outcome, in the same transaction: its end event, the input message''s delivery status, its children, the thread''s queue';

-- Ends a run as its lease holder. p_messages ([{role, content, metadata?}, ...]) are
-- stored as the run's output; `completed` needs at least one assistant message.
-- p_notify: as for run_append_events. p_events ([{event, payload}, ...]): the run's last
-- events, appended before its `end` in the same transaction (one round trip fewer).
CREATE FUNCTION yuxi.run_finish(
    p_run_id uuid, p_token uuid, p_status text, p_messages jsonb DEFAULT '[]',
    p_error_type text DEFAULT NULL, p_error_message text DEFAULT NULL, p_now timestamptz DEFAULT NULL,
    p_notify boolean DEFAULT true, p_events jsonb DEFAULT '[]'
) RETURNS yuxi.agent_runs
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_run yuxi.agent_runs;
    v_output bigint;
    v_events integer;
BEGIN
    IF jsonb_typeof(coalesce(p_events, '[]')) <> 'array'
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(p_events, '[]')) e
                  WHERE e ->> 'event' = 'end') THEN
        RAISE EXCEPTION 'events must be a JSON array without an end event'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_events := jsonb_array_length(coalesce(p_events, '[]'));
    IF p_status IS NULL OR NOT (yuxi.run_is_final(p_status) OR p_status = 'interrupted') THEN
        RAISE EXCEPTION 'a run finishes completed, failed, cancelled or interrupted, not %', coalesce(p_status, 'null')
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF jsonb_typeof(coalesce(p_messages, '[]')) <> 'array' THEN
        RAISE EXCEPTION 'messages must be a JSON array' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_run := yuxi.run_lock(p_run_id);
    PERFORM yuxi.lease_check(v_run, p_token, v_now);

    INSERT INTO yuxi.run_events (run_id, seq, event, payload, created_at)
    SELECT p_run_id, v_run.last_event_seq + e.ord, e.value ->> 'event', coalesce(e.value -> 'payload', '{}'), v_now
    FROM jsonb_array_elements(coalesce(p_events, '[]')) WITH ORDINALITY AS e(value, ord);

    WITH stored AS (
        INSERT INTO yuxi.messages (thread_id, role, content, run_id, request_id, metadata)
        SELECT v_run.thread_id, m.value ->> 'role', m.value ->> 'content', p_run_id, v_run.request_id,
               coalesce(m.value -> 'metadata', '{}')
        FROM jsonb_array_elements(coalesce(p_messages, '[]')) WITH ORDINALITY AS m(value, ord)
        ORDER BY m.ord
        RETURNING id, role
    )
    SELECT max(id) FILTER (WHERE role = 'assistant') INTO v_output FROM stored;

    UPDATE yuxi.agent_runs
    SET status = p_status, output_message_id = v_output,
        error_type = p_error_type, error_message = left(p_error_message, 4000),
        lease_token = NULL, lease_expires_at = NULL, finished_at = v_now, updated_at = v_now,
        last_event_seq = last_event_seq + v_events + 1
    WHERE run_id = p_run_id
    RETURNING * INTO v_run;
    UPDATE yuxi.agent_run_attempts SET ended_at = v_now, outcome = p_status
    WHERE run_id = p_run_id AND lease_token = p_token;
    PERFORM yuxi.run_settle(v_run, false, p_notify);
    RETURN v_run;
END;
$$;
COMMENT ON FUNCTION yuxi.run_finish(uuid, uuid, text, jsonb, text, text, timestamptz, boolean, jsonb) IS
    'Worker: ends a run completed, failed, cancelled or interrupted with its output messages and last events, and moves the thread''s queue on. Raises invalid_input (YV001), lease_lost (YL001), illegal_transition (YT001)';

-- Gives a run back for another attempt (e.g. a worker shutting down). A run whose
-- cancellation was requested is cancelled instead: there is nothing left to retry.
CREATE FUNCTION yuxi.run_release(
    p_run_id uuid, p_token uuid, p_reason text DEFAULT NULL, p_now timestamptz DEFAULT NULL
) RETURNS yuxi.agent_runs
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_run yuxi.agent_runs;
BEGIN
    v_run := yuxi.run_lock(p_run_id);
    PERFORM yuxi.lease_check(v_run, p_token, v_now);
    IF v_run.status = 'cancel_requested' THEN
        RETURN yuxi.run_finish(p_run_id, p_token, 'cancelled', '[]', NULL, NULL, v_now, true, '[]');
    END IF;
    UPDATE yuxi.agent_runs
    SET status = 'pending', lease_token = NULL, lease_expires_at = NULL, updated_at = v_now,
        delivery_job_id = yuxi.run_delivery_job(p_run_id)
    WHERE run_id = p_run_id
    RETURNING * INTO v_run;
    UPDATE yuxi.agent_run_attempts SET ended_at = v_now, outcome = 'released', detail = p_reason
    WHERE run_id = p_run_id AND lease_token = p_token;
    RETURN v_run;
END;
$$;
COMMENT ON FUNCTION yuxi.run_release(uuid, uuid, text, timestamptz) IS
    'Worker: gives a run back as pending for another attempt (a cancel_requested one is cancelled instead). Raises lease_lost (YL001)';

-- Asks a run to stop, and its child runs with it. A pending run (no worker holds it)
-- or an interrupted one is cancelled at once; a running one becomes
-- cancel_requested and its worker is woken; it ends `cancelled` only from there.
-- Already ending or ended runs are left as they are. Returns the run's status.
CREATE FUNCTION yuxi.run_request_cancel(
    p_run_id uuid, p_uid uuid DEFAULT NULL, p_now timestamptz DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_run yuxi.agent_runs;
    v_after yuxi.agent_runs;
    v_child uuid;
BEGIN
    v_run := yuxi.run_lock(p_run_id, p_uid);
    -- An interrupted run that was already resumed no longer holds the thread: its
    -- resume run carries on and is what a caller wants to cancel.
    IF v_run.status = 'pending'
       OR (v_run.status = 'interrupted' AND NOT EXISTS (
               SELECT 1 FROM yuxi.agent_runs WHERE created_by_run_id = p_run_id AND run_type = 'resume'))
    THEN
        UPDATE yuxi.agent_runs
        SET status = 'cancelled', cancel_requested_at = v_now, finished_at = v_now, updated_at = v_now,
            last_event_seq = last_event_seq + CASE WHEN status = 'interrupted' THEN 0 ELSE 1 END
        WHERE run_id = p_run_id
        RETURNING * INTO v_after;
        -- the waiting delivery has nothing left to deliver
        UPDATE public.procrastinate_jobs SET status = 'cancelled'
        WHERE id = v_run.delivery_job_id AND status = 'todo';
        PERFORM yuxi.run_settle(v_after, v_run.status = 'interrupted');
    ELSIF v_run.status = 'running' THEN
        UPDATE yuxi.agent_runs
        SET status = 'cancel_requested', cancel_requested_at = v_now, updated_at = v_now
        WHERE run_id = p_run_id;
        PERFORM pg_notify('yuxi_run_cancel', p_run_id::text);
    END IF;
    FOR v_child IN
        SELECT run_id FROM yuxi.agent_runs
        WHERE created_by_run_id = p_run_id AND run_type = 'subagent'
          AND yuxi.run_is_cancellable(status)
    LOOP
        PERFORM yuxi.run_request_cancel(v_child, NULL, v_now);
    END LOOP;
    RETURN (SELECT status FROM yuxi.agent_runs WHERE run_id = p_run_id);
END;
$$;
COMMENT ON FUNCTION yuxi.run_request_cancel(uuid, uuid, timestamptz) IS
    'Cancels a run and its child runs: pending or interrupted ones at once, running ones become cancel_requested. Returns the run''s status. Raises not_found (YN001)';

-- ---------------------------------------------------------------------------------
-- Resume and subagents

-- Resumes the latest top-level run of a thread, which must be interrupted, as a new
-- `resume` run inheriting its model and approval mode. Idempotent: resuming the same
-- run again returns the resume run already created.
CREATE FUNCTION yuxi.run_resume(
    p_run_id uuid, p_resume jsonb, p_uid uuid DEFAULT NULL, p_request_id text DEFAULT NULL
) RETURNS yuxi.request_info
LANGUAGE plpgsql AS $$
DECLARE
    v_run yuxi.agent_runs;
    v_conv yuxi.conversations;
    v_existing yuxi.agent_runs;
    v_new_run uuid := gen_random_uuid();
BEGIN
    IF p_request_id IS NOT NULL AND NOT yuxi.request_id_is_valid(p_request_id) THEN
        RAISE EXCEPTION 'request_id must be 1-128 characters of letters, digits and . _ : - (starting with a letter or digit)'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    SELECT * INTO v_run FROM yuxi.agent_runs WHERE run_id = p_run_id AND (p_uid IS NULL OR uid = p_uid);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % not found', p_run_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    v_conv := yuxi.thread_lock(p_uid, v_run.thread_id);
    SELECT * INTO v_run FROM yuxi.agent_runs WHERE run_id = p_run_id FOR UPDATE;

    SELECT * INTO v_existing FROM yuxi.agent_runs WHERE created_by_run_id = p_run_id AND run_type = 'resume';
    IF FOUND THEN
        IF p_request_id IS NULL OR p_request_id = v_existing.request_id THEN
            RETURN yuxi.request_view(v_existing.request_id);
        END IF;
        RAISE EXCEPTION 'run % was already resumed by request %', p_run_id, v_existing.request_id
            USING ERRCODE = 'YQ004', HINT = 'resume_superseded';
    END IF;
    IF p_request_id IS NOT NULL
       AND EXISTS (SELECT 1 FROM yuxi.agent_run_requests WHERE request_id = p_request_id) THEN
        RAISE EXCEPTION 'request_id % is already used for another request', p_request_id
            USING ERRCODE = 'YQ001', HINT = 'request_id_conflict';
    END IF;
    IF v_run.run_type = 'subagent' OR v_conv.last_run_id IS DISTINCT FROM p_run_id THEN
        RAISE EXCEPTION 'run % is not the latest run of thread %', p_run_id, v_run.thread_id
            USING ERRCODE = 'YQ004', HINT = 'resume_superseded';
    END IF;
    IF v_run.status <> 'interrupted' THEN
        RAISE EXCEPTION 'run % is %, not interrupted', p_run_id, v_run.status
            USING ERRCODE = 'YQ005', HINT = 'run_not_interrupted';
    END IF;

    p_request_id := coalesce(p_request_id, gen_random_uuid()::text);
    INSERT INTO yuxi.agent_run_requests (request_id, uid, thread_id, source, queue_policy, status,
                                         dispatched_run_id, input_payload)
    VALUES (p_request_id, v_run.uid, v_run.thread_id, 'resume', 'enqueue', 'dispatched', v_new_run,
            (v_run.input_payload - 'resume') || jsonb_build_object('resume', coalesce(p_resume, 'null')));
    INSERT INTO yuxi.agent_runs (run_id, thread_id, uid, agent_slug, request_id, run_type,
                                 created_by_run_id, input_payload, delivery_job_id)
    VALUES (v_new_run, v_run.thread_id, v_run.uid, v_run.agent_slug, p_request_id, 'resume', p_run_id,
            (v_run.input_payload - 'resume') || jsonb_build_object('resume', coalesce(p_resume, 'null')),
            yuxi.run_delivery_job(v_new_run, true));
    UPDATE yuxi.conversations SET last_run_id = v_new_run, updated_at = clock_timestamp()
    WHERE thread_id = v_run.thread_id;
    RETURN yuxi.request_view(p_request_id);
END;
$$;
COMMENT ON FUNCTION yuxi.run_resume(uuid, jsonb, uuid, text) IS
    'Resumes the thread''s latest run, which must be interrupted, as a new resume run; idempotent. Raises invalid_input (YV001), not_found (YN001), request_id_conflict (YQ001), resume_superseded (YQ004), run_not_interrupted (YQ005)';

-- Creates a child run executed on behalf of a running parent (the task tool). The
-- child's model (yuxi.model_resolve): the child agent's config, then the parent run's
-- model, then the system default; its approval mode is the parent's.
CREATE FUNCTION yuxi.run_create_subagent(
    p_parent_run_id uuid, p_token uuid, p_agent_slug text, p_input jsonb DEFAULT '{}',
    p_now timestamptz DEFAULT NULL
) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_parent yuxi.agent_runs;
    v_agent yuxi.agents;
    v_run_id uuid := gen_random_uuid();
BEGIN
    v_parent := yuxi.run_lock_leased(p_parent_run_id, p_token, coalesce(p_now, clock_timestamp()));
    IF v_parent.status <> 'running' THEN
        RAISE EXCEPTION 'run % is %; it cannot start subagents', p_parent_run_id, v_parent.status
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    SELECT * INTO v_agent FROM yuxi.agents WHERE slug = p_agent_slug AND is_subagent;
    IF NOT FOUND OR NOT yuxi.agent_visible_to(p_agent_slug, v_parent.uid) THEN
        RAISE EXCEPTION 'subagent % not found', p_agent_slug USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    INSERT INTO yuxi.agent_runs (run_id, thread_id, uid, agent_slug, request_id, run_type,
                                 created_by_run_id, delivery_job_id, input_payload)
    VALUES (v_run_id, v_parent.thread_id, v_parent.uid, p_agent_slug, v_parent.request_id, 'subagent',
            p_parent_run_id, yuxi.run_delivery_job(v_run_id, true),
            coalesce(p_input, '{}') || jsonb_build_object(
                'model_spec', yuxi.model_resolve(v_agent.config_json,
                                                 p_inherited => v_parent.input_payload ->> 'model_spec'),
                'tool_approval_mode', coalesce(v_parent.input_payload ->> 'tool_approval_mode', 'auto')));
    RETURN v_run_id;
END;
$$;
COMMENT ON FUNCTION yuxi.run_create_subagent(uuid, uuid, text, jsonb, timestamptz) IS
    'Worker: creates a child run of a running parent (the task tool) for a subagent it may use; returns the run id. Raises lease_lost (YL001), illegal_transition (YT001), not_found (YN001)';

-- ---------------------------------------------------------------------------------
-- Maintenance

CREATE VIEW yuxi.expired_run_leases AS
SELECT r.run_id, r.thread_id, r.status, r.lease_owner, r.lease_expires_at, r.attempt_count
FROM yuxi.agent_runs r
WHERE yuxi.run_is_leased(r.status) AND r.lease_expires_at <= clock_timestamp();
COMMENT ON VIEW yuxi.expired_run_leases IS
    'Leased runs whose lease has expired (what yuxi.run_reconcile_expired ends)';

-- Ends runs whose worker stopped renewing. Safe to run from many processes at once:
-- each run is taken under SKIP LOCKED and re-checked, so it is handled exactly once.
-- A run with attempts left (agents.max_run_attempts) is released to continue from its
-- checkpoint; a cancel_requested run ends cancelled; the rest fail with
-- worker_lease_expired and pause their thread's backlog.
CREATE FUNCTION yuxi.run_reconcile_expired(p_now timestamptz DEFAULT NULL, p_limit integer DEFAULT 100)
RETURNS TABLE (run_id uuid, status text)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_candidate record;
    v_run yuxi.agent_runs;
    v_max integer;
BEGIN
    FOR v_candidate IN
        SELECT r.run_id, r.thread_id FROM yuxi.agent_runs r
        WHERE yuxi.run_is_leased(r.status) AND r.lease_expires_at <= v_now
        ORDER BY r.lease_expires_at
        LIMIT p_limit
    LOOP
        PERFORM 1 FROM yuxi.conversations c WHERE c.thread_id = v_candidate.thread_id
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        SELECT * INTO v_run FROM yuxi.agent_runs r
        WHERE r.run_id = v_candidate.run_id AND yuxi.run_is_leased(r.status)
          AND r.lease_expires_at <= v_now
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;

        UPDATE yuxi.agent_run_attempts a
        SET ended_at = v_now, outcome = 'lease_expired',
            detail = format('the worker %s stopped renewing its lease (expired %s)',
                            v_run.lease_owner, v_run.lease_expires_at)
        WHERE a.run_id = v_run.run_id AND a.lease_token = v_run.lease_token;
        SELECT a.max_run_attempts INTO v_max FROM yuxi.agents a WHERE a.slug = v_run.agent_slug;
        IF v_run.status = 'cancel_requested' THEN
            UPDATE yuxi.agent_runs r
            SET status = 'cancelled', lease_token = NULL, lease_expires_at = NULL,
                error_type = 'worker_lease_expired',
                error_message = format('cancelled: the worker %s stopped renewing its lease',
                                       v_run.lease_owner),
                finished_at = v_now, updated_at = v_now, last_event_seq = r.last_event_seq + 1
            WHERE r.run_id = v_run.run_id
            RETURNING * INTO v_run;
            PERFORM yuxi.run_settle(v_run);
        ELSIF v_run.attempt_count < coalesce(v_max, 1) THEN
            UPDATE yuxi.agent_runs r
            SET status = 'pending', lease_token = NULL, lease_expires_at = NULL, updated_at = v_now,
                delivery_job_id = yuxi.run_delivery_job(v_run.run_id)
            WHERE r.run_id = v_run.run_id
            RETURNING * INTO v_run;
        ELSE
            UPDATE yuxi.agent_runs r
            SET status = 'failed', lease_token = NULL, lease_expires_at = NULL,
                error_type = 'worker_lease_expired',
                error_message = format('the worker %s stopped renewing its lease (expired %s)',
                                       v_run.lease_owner, v_run.lease_expires_at),
                finished_at = v_now, updated_at = v_now, last_event_seq = r.last_event_seq + 1
            WHERE r.run_id = v_run.run_id
            RETURNING * INTO v_run;
            PERFORM yuxi.run_settle(v_run);
        END IF;
        run_id := v_run.run_id;
        status := v_run.status;
        RETURN NEXT;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION yuxi.run_reconcile_expired(timestamptz, integer) IS
    'Maintenance: ends runs whose lease expired (released for another attempt, cancelled, or failed with worker_lease_expired); safe from many processes at once';

-- A run's outcome: its status, the text of its final assistant message, its error.
CREATE FUNCTION yuxi.run_result(p_run_id uuid, p_uid uuid DEFAULT NULL)
RETURNS TABLE (status text, output text, final_message_id bigint, error_type text, error_message text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_run yuxi.agent_runs;
BEGIN
    v_run := yuxi.run_get(p_run_id, p_uid);
    RETURN QUERY
    SELECT v_run.status, m.content, v_run.output_message_id, v_run.error_type, v_run.error_message
    FROM (SELECT 1) one
    LEFT JOIN yuxi.messages m ON m.id = v_run.output_message_id;
END;
$$;
COMMENT ON FUNCTION yuxi.run_result(uuid, uuid) IS
    'A run''s status, final assistant text and error. Raises not_found (YN001)';

-- =====================================================================================
-- sql/schema/09_delivery.sql

-- yuxi: delivery, the procrastinate jobs that hand runs to workers, and dispatch, the
-- queue head becoming a run. procrastinate defers jobs through its own SQL function
-- (procrastinate_defer_jobs_v1), so a run and its delivery job commit together.

-- Inserts the procrastinate job that delivers a run, in the caller's transaction, so a
-- pending run always has exactly one waiting delivery and a rolled-back one has none;
-- returns the job id for the caller to store in agent_runs.delivery_job_id in the same
-- write that makes the run pending (a second write of a fresh row would re-run its
-- foreign-key checks). The queueing lock makes a second waiting delivery of the same
-- run impossible; a delivery still waiting is reused. Callers hold the run row, or are
-- creating it.
CREATE FUNCTION yuxi.run_delivery_job(p_run_id uuid, p_new_run boolean DEFAULT false) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_job_id bigint;
BEGIN
    IF NOT p_new_run THEN
        SELECT id INTO v_job_id FROM public.procrastinate_jobs
        WHERE queueing_lock = 'run:' || p_run_id::text AND status = 'todo';
        IF FOUND THEN
            RETURN v_job_id;
        END IF;
    END IF;
    RETURN (public.procrastinate_defer_jobs_v1(ARRAY[
        ROW('yuxi_runs', 'execute_run', 0, NULL, 'run:' || p_run_id::text,
            jsonb_build_object('run_id', p_run_id::text), NULL)::public.procrastinate_job_to_defer_v1
    ]))[1];
END;
$$;
COMMENT ON FUNCTION yuxi.run_delivery_job(uuid, boolean) IS
    'Internal: the procrastinate job that delivers a run, inserted in the caller''s transaction (a waiting one is reused)';

-- Dispatches the queue head of a thread whose conversation row the caller holds
-- locked, and which has no active run. Returns the new run, or NULL for an empty queue.
CREATE FUNCTION yuxi.thread_dispatch_head(p_conv yuxi.conversations) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_req yuxi.agent_run_requests;
    v_run_id uuid := gen_random_uuid();
BEGIN
    SELECT * INTO v_req FROM yuxi.agent_run_requests
    WHERE thread_id = p_conv.thread_id AND status = 'queued' AND queue_policy = 'steer';
    IF NOT FOUND THEN
        SELECT * INTO v_req FROM yuxi.agent_run_requests
        WHERE thread_id = p_conv.thread_id AND status = 'queued'
        ORDER BY created_at, id
        LIMIT 1;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
    END IF;

    INSERT INTO yuxi.agent_runs (run_id, thread_id, uid, agent_slug, request_id, run_type,
                                 input_message_id, input_payload, delivery_job_id)
    VALUES (v_run_id, p_conv.thread_id, v_req.uid, p_conv.agent_slug, v_req.request_id, 'chat',
            v_req.input_message_id, v_req.input_payload, yuxi.run_delivery_job(v_run_id, true));
    UPDATE yuxi.agent_run_requests
    SET status = 'dispatched', dispatched_run_id = v_run_id, updated_at = clock_timestamp()
    WHERE request_id = v_req.request_id;
    UPDATE yuxi.messages SET delivery_status = 'dispatched', run_id = v_run_id
    WHERE id = v_req.input_message_id;
    UPDATE yuxi.conversations
    SET last_run_id = v_run_id, paused_by_run_id = NULL, updated_at = clock_timestamp()
    WHERE thread_id = p_conv.thread_id;
    RETURN v_run_id;
END;
$$;
COMMENT ON FUNCTION yuxi.thread_dispatch_head(yuxi.conversations) IS
    'Internal: dispatches the queue head of a locked thread that has no active run; returns the new run or NULL';

-- Pending runs whose delivery is gone: no job, a finished job, or a job whose worker
-- is gone. The recovery scan re-delivers these.
CREATE VIEW yuxi.undelivered_runs AS
SELECT r.run_id, r.thread_id, r.created_at, r.delivery_job_id, j.status::text AS job_status
FROM yuxi.agent_runs r
LEFT JOIN public.procrastinate_jobs j ON j.id = r.delivery_job_id
WHERE r.status = 'pending'
  AND (j.id IS NULL
       OR j.status NOT IN ('todo', 'doing')
       OR (j.status = 'doing' AND j.worker_id IS NULL));
COMMENT ON VIEW yuxi.undelivered_runs IS
    'Pending runs whose delivery job is gone (what yuxi.run_redeliver_orphans re-delivers)';

-- Re-delivers pending runs whose delivery job is gone. Never duplicates a delivery:
-- the run row is locked and the queueing lock admits one waiting job per run.
CREATE FUNCTION yuxi.run_redeliver_orphans(p_limit integer DEFAULT 100)
RETURNS TABLE (run_id uuid, job_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_candidate uuid;
BEGIN
    FOR v_candidate IN
        SELECT u.run_id FROM yuxi.undelivered_runs u ORDER BY u.created_at LIMIT p_limit
    LOOP
        PERFORM 1 FROM yuxi.agent_runs r
        WHERE r.run_id = v_candidate AND r.status = 'pending'
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        -- re-checked under the lock: another scan may have just re-delivered it
        CONTINUE WHEN NOT EXISTS (SELECT 1 FROM yuxi.undelivered_runs u WHERE u.run_id = v_candidate);
        CONTINUE WHEN EXISTS (SELECT 1 FROM public.procrastinate_jobs j
                              WHERE j.queueing_lock = 'run:' || v_candidate::text AND j.status = 'todo');
        run_id := v_candidate;
        UPDATE yuxi.agent_runs r SET delivery_job_id = yuxi.run_delivery_job(v_candidate)
        WHERE r.run_id = v_candidate
        RETURNING r.delivery_job_id INTO job_id;
        RETURN NEXT;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION yuxi.run_redeliver_orphans(integer) IS
    'Maintenance: re-delivers pending runs whose delivery job is gone, never duplicating one';

-- =====================================================================================
-- sql/schema/10_events.sql

-- yuxi: run events (the durable log SSE replays) and the notifications that wake the
-- streams following a run or a request.

-- ---------------------------------------------------------------------------------
-- Run events

-- Appends events ([{event, payload}, ...]) with gap-free seqs; returns the last seq.
-- `end` is written only when the run finishes, so there is exactly one.
-- p_notify => false: the caller sends the yuxi_run_events NOTIFY itself right after
-- commit. PostgreSQL serialises the commits of all transactions that NOTIFY, disk flush
-- included, so the hot paths of a worker notify from a transaction of their own.
CREATE FUNCTION yuxi.run_append_events(
    p_run_id uuid, p_token uuid, p_events jsonb, p_now timestamptz DEFAULT NULL,
    p_notify boolean DEFAULT true
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_count integer;
    v_last bigint;
BEGIN
    IF jsonb_typeof(p_events) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'events must be a JSON array' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_count := jsonb_array_length(p_events);
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(p_events) e WHERE e ->> 'event' = 'end') THEN
        RAISE EXCEPTION 'the end event is written by run_finish' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    -- The row lock taken by this UPDATE serialises appenders of one run.
    UPDATE yuxi.agent_runs
    SET last_event_seq = last_event_seq + v_count
    WHERE run_id = p_run_id AND lease_token = p_token AND lease_expires_at > v_now
      AND yuxi.run_is_leased(status)
    RETURNING last_event_seq INTO v_last;
    IF NOT FOUND THEN
        PERFORM yuxi.run_lock_leased(p_run_id, p_token, v_now);  -- raises the precise error
    END IF;
    IF v_count = 0 THEN
        RETURN v_last;
    END IF;
    INSERT INTO yuxi.run_events (run_id, seq, event, payload, created_at)
    SELECT p_run_id, v_last - v_count + e.ord, e.value ->> 'event', coalesce(e.value -> 'payload', '{}'), v_now
    FROM jsonb_array_elements(p_events) WITH ORDINALITY AS e(value, ord);
    IF p_notify THEN
        PERFORM pg_notify('yuxi_run_events', p_run_id::text || ' ' || v_last::text);
    END IF;
    RETURN v_last;
END;
$$;
COMMENT ON FUNCTION yuxi.run_append_events(uuid, uuid, jsonb, timestamptz, boolean) IS
    'Worker: appends events [{event, payload}] with gap-free seqs; returns the last seq. Raises invalid_input (YV001), lease_lost (YL001)';

-- Events of a run after a seq, for SSE replay.
CREATE FUNCTION yuxi.run_events_after(p_run_id uuid, p_after bigint, p_limit integer DEFAULT 1000)
RETURNS TABLE (seq bigint, event text, payload jsonb, created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT e.seq, e.event, e.payload, e.created_at FROM yuxi.run_events e
    WHERE e.run_id = p_run_id AND e.seq > p_after
    ORDER BY e.seq
    LIMIT p_limit
$$;
COMMENT ON FUNCTION yuxi.run_events_after(uuid, bigint, integer) IS
    'A run''s events after a seq, for SSE replay';

-- The run's stored `end` event (none while the run is not over).
CREATE FUNCTION yuxi.run_end_event(p_run_id uuid)
RETURNS TABLE (seq bigint, event text, payload jsonb, created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT e.seq, e.event, e.payload, e.created_at FROM yuxi.run_events e
    WHERE e.run_id = p_run_id AND e.event = 'end'
$$;
COMMENT ON FUNCTION yuxi.run_end_event(uuid) IS
    'A run''s end event (no row while the run is not over)';

-- ---------------------------------------------------------------------------------
-- Request followers
--
-- GET /api/agent/requests/{id}/events follows a request through its thread's queue. Most
-- changes reach it through the thread's latest run: a run's end is committed together
-- with the dispatch of the next request, and run_finish notifies yuxi_run_events. The
-- others notify yuxi_request_events with the thread id, from these triggers, so that a
-- change made from psql is heard as promptly as one made through the API:
--
--   a queued request cancelled (alone, or with its deleted thread);
--   a queued request steered, or submitted as a steer while the thread is busy;
--   a paused backlog resumed (thread_continue, or the last queued request cancelled);
--   an interrupted run resumed (the thread's latest run is then the new resume run).
--
-- All of these are rare. A plain submit, a dispatch and a finish fire none of them: the
-- WHEN conditions are false there, so the hot paths send no NOTIFY from here (a NOTIFY
-- serialises its transaction's commit with every other notifying commit of the cluster).

CREATE FUNCTION yuxi.notify_request_followers() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- identical notifications of one transaction are delivered once
    PERFORM pg_notify('yuxi_request_events', NEW.thread_id::text);
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION yuxi.notify_request_followers() IS
    'Trigger: notifies yuxi_request_events with the thread id';

CREATE TRIGGER agent_run_requests_cancelled_while_queued
    AFTER UPDATE OF status ON yuxi.agent_run_requests
    FOR EACH ROW WHEN (OLD.status = 'queued' AND NEW.status = 'cancelled')
    EXECUTE FUNCTION yuxi.notify_request_followers();

CREATE TRIGGER agent_run_requests_steered
    AFTER INSERT OR UPDATE OF queue_policy ON yuxi.agent_run_requests
    FOR EACH ROW WHEN (NEW.queue_policy = 'steer' AND NEW.status = 'queued')
    EXECUTE FUNCTION yuxi.notify_request_followers();

CREATE TRIGGER conversations_unpaused
    AFTER UPDATE OF paused_by_run_id ON yuxi.conversations
    FOR EACH ROW WHEN (OLD.paused_by_run_id IS NOT NULL AND NEW.paused_by_run_id IS NULL
                       AND NEW.status = 'active')
    EXECUTE FUNCTION yuxi.notify_request_followers();

CREATE TRIGGER agent_runs_resume_created
    AFTER INSERT ON yuxi.agent_runs
    FOR EACH ROW WHEN (NEW.run_type = 'resume')
    EXECUTE FUNCTION yuxi.notify_request_followers();

-- =====================================================================================
-- sql/schema/11_guards.sql

-- yuxi: triggers that keep the state machines legal for every writer, including a raw
-- UPDATE typed at a psql prompt.

-- Run state machine (yuxi.run_transition_allowed, 00_vocabulary.sql; drawn in
-- docs/queue.md):
--   pending          -> running | cancelled
--   running          -> running | cancel_requested | completed | failed | interrupted | pending (release)
--   cancel_requested -> cancel_requested | cancelled | completed | failed
--   interrupted      -> cancelled
--   completed, failed, cancelled: final
CREATE FUNCTION yuxi.agent_runs_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.status <> 'pending' THEN
            RAISE EXCEPTION 'a run starts pending, not %', NEW.status
                USING ERRCODE = 'YT001', HINT = 'illegal_transition';
        END IF;
        RETURN NEW;
    END IF;

    IF NEW.run_id <> OLD.run_id OR NEW.thread_id <> OLD.thread_id OR NEW.request_id <> OLD.request_id
       OR NEW.run_type <> OLD.run_type OR NEW.uid <> OLD.uid
       OR NEW.created_by_run_id IS DISTINCT FROM OLD.created_by_run_id
       OR NEW.input_payload <> OLD.input_payload
       OR NEW.attempt_count < OLD.attempt_count OR NEW.last_event_seq < OLD.last_event_seq THEN
        RAISE EXCEPTION 'run % identity, input, attempts and event seq cannot be rewritten', OLD.run_id
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    IF OLD.manifest_fingerprint IS NOT NULL
       AND (NEW.manifest_fingerprint IS DISTINCT FROM OLD.manifest_fingerprint
            OR NEW.manifest IS DISTINCT FROM OLD.manifest) THEN
        RAISE EXCEPTION 'run % manifest is write-once (fingerprint %)', OLD.run_id, OLD.manifest_fingerprint
            USING ERRCODE = 'YM001', HINT = 'manifest_conflict';
    END IF;

    IF NEW.status IS DISTINCT FROM OLD.status
       AND NOT yuxi.run_transition_allowed(OLD.status, NEW.status) THEN
        RAISE EXCEPTION 'run % cannot go from % to %', OLD.run_id, OLD.status, NEW.status
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    IF yuxi.run_is_final(OLD.status)
       AND (NEW.output_message_id IS DISTINCT FROM OLD.output_message_id
            OR NEW.error_type IS DISTINCT FROM OLD.error_type
            OR NEW.error_message IS DISTINCT FROM OLD.error_message
            OR NEW.finished_at IS DISTINCT FROM OLD.finished_at) THEN
        RAISE EXCEPTION 'run % is % and its outcome is final', OLD.run_id, OLD.status
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    IF NEW.status = 'completed' AND OLD.status <> 'completed' AND NOT EXISTS (
           SELECT 1 FROM yuxi.messages m
           WHERE m.id = NEW.output_message_id AND m.run_id = NEW.run_id AND m.role = 'assistant') THEN
        RAISE EXCEPTION 'run % cannot complete without an assistant message of its own', OLD.run_id
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION yuxi.agent_runs_guard() IS
    'Trigger: refuses illegal run transitions and rewrites (illegal_transition YT001, manifest_conflict YM001)';

CREATE TRIGGER agent_runs_guard
    BEFORE INSERT OR UPDATE ON yuxi.agent_runs
    FOR EACH ROW EXECUTE FUNCTION yuxi.agent_runs_guard();

-- Request state machine:
--   queued -> dispatched | cancelled | failed; a queued enqueue may become a steer
--   dispatched, cancelled, rejected, failed: final
-- What was received (text, model, approval mode, thread, user) never changes.
CREATE FUNCTION yuxi.agent_run_requests_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.status NOT IN ('queued', 'rejected', 'dispatched') THEN
            RAISE EXCEPTION 'a request starts queued, rejected or dispatched, not %', NEW.status
                USING ERRCODE = 'YT001', HINT = 'illegal_transition';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.request_id <> OLD.request_id OR NEW.uid <> OLD.uid OR NEW.thread_id <> OLD.thread_id
       OR NEW.source <> OLD.source OR NEW.input_payload <> OLD.input_payload
       OR NEW.input_message_id IS DISTINCT FROM OLD.input_message_id
       OR NEW.created_at <> OLD.created_at OR NEW.id <> OLD.id THEN
        RAISE EXCEPTION 'request % content cannot be rewritten', OLD.request_id
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status
       AND NOT (OLD.status = 'queued' AND NEW.status IN ('dispatched', 'cancelled', 'failed')) THEN
        RAISE EXCEPTION 'request % cannot go from % to %', OLD.request_id, OLD.status, NEW.status
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    IF NEW.dispatched_run_id IS DISTINCT FROM OLD.dispatched_run_id AND OLD.dispatched_run_id IS NOT NULL THEN
        RAISE EXCEPTION 'request % is already dispatched as run %', OLD.request_id, OLD.dispatched_run_id
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    IF NEW.queue_policy IS DISTINCT FROM OLD.queue_policy
       AND NOT (OLD.status = 'queued' AND NEW.status = 'queued'
                AND OLD.queue_policy = 'enqueue' AND NEW.queue_policy = 'steer') THEN
        RAISE EXCEPTION 'request % policy cannot go from % to %', OLD.request_id, OLD.queue_policy, NEW.queue_policy
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION yuxi.agent_run_requests_guard() IS
    'Trigger: refuses illegal request transitions and rewrites (illegal_transition YT001)';

CREATE TRIGGER agent_run_requests_guard
    BEFORE INSERT OR UPDATE ON yuxi.agent_run_requests
    FOR EACH ROW EXECUTE FUNCTION yuxi.agent_run_requests_guard();

-- Messages are history: their text, role, thread and request never change; a message
-- is linked to a run at most once.
CREATE FUNCTION yuxi.messages_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.content <> OLD.content OR NEW.role <> OLD.role OR NEW.thread_id <> OLD.thread_id
       OR NEW.request_id IS DISTINCT FROM OLD.request_id OR NEW.id <> OLD.id
       OR (OLD.run_id IS NOT NULL AND NEW.run_id IS DISTINCT FROM OLD.run_id) THEN
        RAISE EXCEPTION 'message % cannot be rewritten', OLD.id
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION yuxi.messages_guard() IS
    'Trigger: refuses rewriting a message (illegal_transition YT001)';

CREATE TRIGGER messages_guard
    BEFORE UPDATE ON yuxi.messages
    FOR EACH ROW EXECUTE FUNCTION yuxi.messages_guard();

-- An attempt is written when it starts and once when it ends, never after.
CREATE FUNCTION yuxi.agent_run_attempts_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.ended_at IS NOT NULL OR NEW.run_id <> OLD.run_id OR NEW.attempt_no <> OLD.attempt_no
       OR NEW.worker <> OLD.worker OR NEW.lease_token <> OLD.lease_token
       OR NEW.started_at <> OLD.started_at THEN
        RAISE EXCEPTION 'attempt % of run % is final', OLD.attempt_no, OLD.run_id
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION yuxi.agent_run_attempts_guard() IS
    'Trigger: refuses rewriting an attempt that ended (illegal_transition YT001)';

CREATE TRIGGER agent_run_attempts_guard
    BEFORE UPDATE ON yuxi.agent_run_attempts
    FOR EACH ROW EXECUTE FUNCTION yuxi.agent_run_attempts_guard();

-- Events are an append-only log.
CREATE FUNCTION yuxi.run_events_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'run events are append-only' USING ERRCODE = 'YT001', HINT = 'illegal_transition';
END;
$$;
COMMENT ON FUNCTION yuxi.run_events_guard() IS
    'Trigger: refuses updating run events (illegal_transition YT001)';

CREATE TRIGGER run_events_guard
    BEFORE UPDATE ON yuxi.run_events
    FOR EACH ROW EXECUTE FUNCTION yuxi.run_events_guard();

-- =====================================================================================
-- sql/schema/12_history.sql

-- yuxi: reading a thread's history: its runs and messages, and the whole response as
-- the API streams it, built from the history entries each row carries
-- (01_rendering.sql).

-- Every run of a thread, lightest form, in creation order (history's `runs`).
CREATE FUNCTION yuxi.thread_runs(p_uid uuid, p_thread_id uuid)
RETURNS TABLE (run_id uuid, request_id text, run_type text, created_by_run_id uuid, status text,
               created_at timestamptz, started_at timestamptz, finished_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT r.run_id, r.request_id, r.run_type, r.created_by_run_id, r.status,
           r.created_at, r.started_at, r.finished_at
    FROM yuxi.agent_runs r
    JOIN yuxi.conversations c ON c.thread_id = r.thread_id
    WHERE r.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active'
    ORDER BY r.created_at, r.run_id
$$;
COMMENT ON FUNCTION yuxi.thread_runs(uuid, uuid) IS
    'Every run of the user''s thread, lightest form, in creation order';

-- Every message of a thread in order (history's `history`); linked to runs by run_id.
CREATE FUNCTION yuxi.thread_messages(p_uid uuid, p_thread_id uuid)
RETURNS TABLE (id bigint, role text, content text, run_id uuid, request_id text,
               delivery_status text, metadata jsonb, created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT m.id, m.role, m.content, m.run_id, m.request_id, m.delivery_status, m.metadata, m.created_at
    FROM yuxi.messages m
    JOIN yuxi.conversations c ON c.thread_id = m.thread_id
    WHERE m.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active'
    ORDER BY m.id
$$;
COMMENT ON FUNCTION yuxi.thread_messages(uuid, uuid) IS
    'Every message of the user''s thread, in order';

-- The thread as the API shows it (Thread).
CREATE FUNCTION yuxi.thread_json(t yuxi.thread_info) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT '{"id":"' || t.id
        || '","agent_id":' || yuxi.json_text(t.agent_id)
        || ',"project_id":' || yuxi.json_text(t.project_id::text)
        || ',"title":' || yuxi.json_text(t.title)
        || ',"thread_status":' || yuxi.json_text(t.thread_status)
        || ',"created_at":' || yuxi.json_time(t.created_at)
        || ',"updated_at":' || yuxi.json_time(t.updated_at)
        || '}'
$$;
COMMENT ON FUNCTION yuxi.thread_json(yuxi.thread_info) IS
    'Internal: a thread as the API renders it (JSON text)';

-- The entries of a thread's runs (by creation time, then id) and of its messages (by
-- id), in chunks of 256 comma-separated entries (the last one fewer), in chunk order. The API streams
-- them between the thread and the closing brackets, so the response leaves while
-- PostgreSQL is still producing it; chunks, not one value per list, because sending one
-- multi-megabyte value costs PostgreSQL about twice the CPU. Nothing for a thread the
-- user cannot see (the API calls yuxi.thread_get first, in the same snapshot).
CREATE FUNCTION yuxi.thread_history_runs(p_uid uuid, p_thread_id uuid)
RETURNS TABLE (chunk bigint, entries text)
LANGUAGE sql STABLE AS $$
    SELECT r.chunk, string_agg(r.history_entry, ',' ORDER BY r.created_at, r.run_id)
    FROM (SELECT history_entry, created_at, run_id,
                 (row_number() OVER (ORDER BY created_at, run_id) - 1) / 256 AS chunk
          FROM yuxi.agent_runs
          WHERE thread_id = p_thread_id
            AND EXISTS (SELECT 1 FROM yuxi.conversations c
                        WHERE c.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active')) r
    GROUP BY r.chunk
    ORDER BY r.chunk
$$;
COMMENT ON FUNCTION yuxi.thread_history_runs(uuid, uuid) IS
    'History: the run entries of the user''s thread, in chunks of 256 comma-separated JSON objects';

CREATE FUNCTION yuxi.thread_history_messages(p_uid uuid, p_thread_id uuid)
RETURNS TABLE (chunk bigint, entries text)
LANGUAGE sql STABLE AS $$
    SELECT m.chunk, string_agg(m.history_entry, ',' ORDER BY m.id)
    FROM (SELECT history_entry, id, (row_number() OVER (ORDER BY id) - 1) / 256 AS chunk
          FROM yuxi.messages
          WHERE thread_id = p_thread_id
            AND EXISTS (SELECT 1 FROM yuxi.conversations c
                        WHERE c.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active')) m
    GROUP BY m.chunk
    ORDER BY m.chunk
$$;
COMMENT ON FUNCTION yuxi.thread_history_messages(uuid, uuid) IS
    'History: the message entries of the user''s thread, in chunks of 256 comma-separated JSON objects';

-- The whole history response, {thread, runs, history}, as one JSON text: the body
-- GET /api/chat/thread/{id}/history sends, byte for byte. For psql. Raises not_found
-- (YN001) like thread_get.
CREATE FUNCTION yuxi.thread_history_json(p_uid uuid, p_thread_id uuid) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT '{"thread":' || yuxi.thread_json(yuxi.thread_get(p_uid, p_thread_id))
        || ',"runs":['
        || coalesce((SELECT string_agg(entries, ',' ORDER BY chunk)
                     FROM yuxi.thread_history_runs(p_uid, p_thread_id)), '')
        || '],"history":['
        || coalesce((SELECT string_agg(entries, ',' ORDER BY chunk)
                     FROM yuxi.thread_history_messages(p_uid, p_thread_id)), '')
        || ']}'
$$;
COMMENT ON FUNCTION yuxi.thread_history_json(uuid, uuid) IS
    'The whole history response {thread, runs, history} as JSON text, byte for byte what the API sends. Raises not_found (YN001)';

-- =====================================================================================
-- sql/schema/13_scheduling.sql

-- yuxi: scheduled agent jobs and their occurrences.
--
-- A job fires at most once per slot: unique (job_id, scheduled_for) for scheduled
-- occurrences. Each fire creates a fresh conversation in the job's project and submits
-- the prompt through yuxi.request_submit, the one submit path. Cron arithmetic lives in
-- Python (yuxi/scheduling/cron.py); these functions receive the computed instants.

-- An occurrence with its run's current status, read from the run, never copied.
CREATE FUNCTION yuxi.occurrence_view(p_occurrence yuxi.scheduled_job_occurrences)
RETURNS yuxi.occurrence_info
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_run_id uuid;
    v_run_status text;
BEGIN
    SELECT r.dispatched_run_id, run.status INTO v_run_id, v_run_status
    FROM yuxi.agent_run_requests r
    LEFT JOIN yuxi.agent_runs run ON run.run_id = r.dispatched_run_id
    WHERE r.request_id = p_occurrence.request_id;
    RETURN (p_occurrence.id, p_occurrence.job_id, p_occurrence.scheduled_for,
            p_occurrence.trigger, p_occurrence.status, p_occurrence.thread_id,
            p_occurrence.request_id, v_run_id, v_run_status, p_occurrence.error,
            p_occurrence.created_at)::yuxi.occurrence_info;
END;
$$;
COMMENT ON FUNCTION yuxi.occurrence_view(yuxi.scheduled_job_occurrences) IS
    'Internal: an occurrence with its run and the run''s current status';

-- Why the user may not (any more) run this job's agent in this project; NULL when fine.
CREATE FUNCTION yuxi.job_access_error(p_uid uuid, p_project_id uuid, p_agent_slug text)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM yuxi.users WHERE id = p_uid AND deleted_at IS NULL) THEN
        RETURN 'the job''s user no longer exists';
    ELSIF p_project_id IS NULL OR NOT EXISTS (
              SELECT 1 FROM yuxi.projects
              WHERE id = p_project_id AND uid = p_uid AND deleted_at IS NULL) THEN
        RETURN format('project %s not found', coalesce(p_project_id::text, '(deleted)'));
    ELSIF NOT yuxi.agent_visible_to(p_agent_slug, p_uid) THEN
        RETURN format('agent %s not found', p_agent_slug);
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION yuxi.job_access_error(uuid, uuid, text) IS
    'Internal: why the user may not (any more) run this agent in this project, or NULL';

CREATE FUNCTION yuxi.job_check_access(p_uid uuid, p_project_id uuid, p_agent_slug text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_error text := yuxi.job_access_error(p_uid, p_project_id, p_agent_slug);
BEGIN
    IF v_error IS NOT NULL THEN
        RAISE EXCEPTION '%', v_error USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.job_check_access(uuid, uuid, text) IS
    'Internal: raises not_found (YN001) with the reason of yuxi.job_access_error';

CREATE FUNCTION yuxi.job_check_prompt(p_prompt text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_prompt IS NULL OR p_prompt ~ '^[[:space:]]*$' OR length(p_prompt) > 100000 THEN
        RAISE EXCEPTION 'prompt must be 1-100000 characters and not blank'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.job_check_prompt(text) IS
    'Internal: raises invalid_input (YV001) for a blank or oversized prompt';

CREATE FUNCTION yuxi.job_create(
    p_uid uuid, p_project_id uuid, p_agent_slug text, p_prompt text, p_tool_approval_mode text,
    p_cron text, p_timezone text, p_enabled boolean, p_next_fire_at timestamptz
) RETURNS yuxi.scheduled_agent_jobs
LANGUAGE plpgsql AS $$
DECLARE
    v_job yuxi.scheduled_agent_jobs;
BEGIN
    PERFORM yuxi.job_check_access(p_uid, p_project_id, p_agent_slug);
    PERFORM yuxi.job_check_prompt(p_prompt);
    INSERT INTO yuxi.scheduled_agent_jobs (uid, project_id, agent_slug, prompt, tool_approval_mode,
                                           cron, timezone, enabled, next_fire_at)
    VALUES (p_uid, p_project_id, p_agent_slug, p_prompt, coalesce(p_tool_approval_mode, 'auto'),
            p_cron, p_timezone, coalesce(p_enabled, true), p_next_fire_at)
    RETURNING * INTO v_job;
    RETURN v_job;
END;
$$;
COMMENT ON FUNCTION yuxi.job_create(uuid, uuid, text, text, text, text, text, boolean, timestamptz) IS
    'Creates a scheduled job (the caller computes the next fire time). Raises not_found (YN001), invalid_input (YV001)';

-- The caller's live job, locked; not_found otherwise.
CREATE FUNCTION yuxi.job_lock(p_uid uuid, p_job_id uuid) RETURNS yuxi.scheduled_agent_jobs
LANGUAGE plpgsql AS $$
DECLARE
    v_job yuxi.scheduled_agent_jobs;
BEGIN
    SELECT * INTO v_job FROM yuxi.scheduled_agent_jobs
    WHERE id = p_job_id AND (p_uid IS NULL OR uid = p_uid) AND deleted_at IS NULL
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'scheduled job % not found', p_job_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN v_job;
END;
$$;
COMMENT ON FUNCTION yuxi.job_lock(uuid, uuid) IS
    'Internal: the caller''s live job, locked. Raises not_found (YN001)';

-- The caller's live job (any user's for an operator, p_uid NULL); not_found otherwise.
CREATE FUNCTION yuxi.job_get(p_uid uuid, p_job_id uuid) RETURNS yuxi.scheduled_agent_jobs
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_job yuxi.scheduled_agent_jobs;
BEGIN
    SELECT * INTO v_job FROM yuxi.scheduled_agent_jobs
    WHERE id = p_job_id AND (p_uid IS NULL OR uid = p_uid) AND deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'scheduled job % not found', p_job_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN v_job;
END;
$$;
COMMENT ON FUNCTION yuxi.job_get(uuid, uuid) IS
    'The user''s live job (any user''s for p_uid NULL). Raises not_found (YN001)';

-- The user's live jobs, oldest first.
CREATE FUNCTION yuxi.job_list(p_uid uuid) RETURNS SETOF yuxi.scheduled_agent_jobs
LANGUAGE sql STABLE AS $$
    SELECT * FROM yuxi.scheduled_agent_jobs
    WHERE uid = p_uid AND deleted_at IS NULL
    ORDER BY created_at, id
$$;
COMMENT ON FUNCTION yuxi.job_list(uuid) IS
    'The user''s live jobs, oldest first (created_at, id)';

-- Replaces a job's settings (the caller passes every field, changed or not) and its
-- next fire time, re-validating project ownership and agent visibility.
CREATE FUNCTION yuxi.job_update(
    p_uid uuid, p_job_id uuid, p_project_id uuid, p_agent_slug text, p_prompt text,
    p_tool_approval_mode text, p_cron text, p_timezone text, p_enabled boolean,
    p_next_fire_at timestamptz
) RETURNS yuxi.scheduled_agent_jobs
LANGUAGE plpgsql AS $$
DECLARE
    v_job yuxi.scheduled_agent_jobs;
BEGIN
    PERFORM yuxi.job_lock(p_uid, p_job_id);
    PERFORM yuxi.job_check_access(p_uid, p_project_id, p_agent_slug);
    PERFORM yuxi.job_check_prompt(p_prompt);
    UPDATE yuxi.scheduled_agent_jobs
    SET project_id = p_project_id, agent_slug = p_agent_slug, prompt = p_prompt,
        tool_approval_mode = p_tool_approval_mode, cron = p_cron, timezone = p_timezone,
        enabled = p_enabled, next_fire_at = p_next_fire_at, updated_at = now()
    WHERE id = p_job_id
    RETURNING * INTO v_job;
    RETURN v_job;
END;
$$;
COMMENT ON FUNCTION yuxi.job_update(uuid, uuid, uuid, text, text, text, text, text, boolean, timestamptz) IS
    'Replaces a job''s settings and next fire time, re-checking project and agent. Raises not_found (YN001), invalid_input (YV001)';

-- Soft delete: the job stops firing; its occurrences stay readable by operators.
CREATE FUNCTION yuxi.job_delete(p_uid uuid, p_job_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM yuxi.job_lock(p_uid, p_job_id);
    UPDATE yuxi.scheduled_agent_jobs SET deleted_at = now(), enabled = false, updated_at = now()
    WHERE id = p_job_id;
END;
$$;
COMMENT ON FUNCTION yuxi.job_delete(uuid, uuid) IS
    'Soft-deletes a job: it stops firing. Raises not_found (YN001)';

-- Pause or resume firing (psql: SELECT yuxi.job_set_enabled(NULL, '<id>', false)).
-- Resuming needs the next fire time, which the caller computes from the cron.
CREATE FUNCTION yuxi.job_set_enabled(
    p_uid uuid, p_job_id uuid, p_enabled boolean, p_next_fire_at timestamptz DEFAULT NULL
) RETURNS yuxi.scheduled_agent_jobs
LANGUAGE plpgsql AS $$
DECLARE
    v_job yuxi.scheduled_agent_jobs;
BEGIN
    PERFORM yuxi.job_lock(p_uid, p_job_id);
    UPDATE yuxi.scheduled_agent_jobs
    SET enabled = p_enabled, next_fire_at = coalesce(p_next_fire_at, next_fire_at), updated_at = now()
    WHERE id = p_job_id
    RETURNING * INTO v_job;
    RETURN v_job;
END;
$$;
COMMENT ON FUNCTION yuxi.job_set_enabled(uuid, uuid, boolean, timestamptz) IS
    'Pauses or resumes a job (resuming takes the next fire time). Raises not_found (YN001)';

-- Due jobs for one ticker transaction, locked so concurrent tickers take disjoint sets.
CREATE FUNCTION yuxi.jobs_due(p_now timestamptz, p_limit integer DEFAULT 100)
RETURNS SETOF yuxi.scheduled_agent_jobs
LANGUAGE sql AS $$
    SELECT * FROM yuxi.scheduled_agent_jobs
    WHERE enabled AND deleted_at IS NULL AND next_fire_at <= p_now
    ORDER BY next_fire_at
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED
$$;
COMMENT ON FUNCTION yuxi.jobs_due(timestamptz, integer) IS
    'Ticker: due jobs, locked FOR UPDATE SKIP LOCKED so concurrent tickers take disjoint sets';

-- True while the conversation of the job's latest submitted occurrence still has work
-- in flight: a queued request, a run pending or running, or a run interrupted and
-- waiting for the user (read from the conversation's latest run, so a question that
-- was answered and resumed no longer counts).
CREATE FUNCTION yuxi.job_busy(p_job_id uuid) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce((
        SELECT coalesce(NOT yuxi.run_is_final(last.status), false)
               OR EXISTS (SELECT 1 FROM yuxi.agent_run_requests q
                          WHERE q.thread_id = c.thread_id AND q.status = 'queued')
        FROM yuxi.scheduled_job_occurrences o
        JOIN yuxi.conversations c ON c.thread_id = o.thread_id AND c.status = 'active'
        LEFT JOIN yuxi.agent_runs last ON last.run_id = c.last_run_id
        WHERE o.job_id = p_job_id AND o.status = 'submitted'
        ORDER BY o.created_at DESC
        LIMIT 1
    ), false)
$$
-- planned for each call: a plan cached while the tables were small (e.g. analyzed
-- empty on a fresh install) would keep scanning them whole as they grow
SET plan_cache_mode = force_custom_plan;
COMMENT ON FUNCTION yuxi.job_busy(uuid) IS
    'Internal: true while the job''s latest submitted occurrence still has work in flight';

-- Fires one job: the single path for the ticker (trigger 'schedule', the job locked by
-- jobs_due, p_next_fire_at given) and for "run now" (trigger 'manual', p_uid checked).
-- Records exactly one occurrence: skipped while the previous one is in flight, failed
-- with the reason when the project or agent is no longer available, else submitted
-- with a fresh conversation. A scheduled slot already recorded (another ticker won) is
-- returned as it is. Unknown errors propagate: the caller leaves the slot for the next
-- tick.
CREATE FUNCTION yuxi.job_fire(
    p_job_id uuid, p_trigger text, p_scheduled_for timestamptz,
    p_next_fire_at timestamptz DEFAULT NULL, p_uid uuid DEFAULT NULL
) RETURNS yuxi.occurrence_info
LANGUAGE plpgsql AS $$
DECLARE
    v_job yuxi.scheduled_agent_jobs;
    v_occurrence yuxi.scheduled_job_occurrences;
    v_id uuid := gen_random_uuid();
    v_snapshot jsonb;
    v_error text;
    v_thread uuid;
    v_request text;
BEGIN
    IF p_trigger NOT IN ('schedule', 'manual') THEN
        RAISE EXCEPTION 'trigger is schedule or manual' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    v_job := yuxi.job_lock(p_uid, p_job_id);
    IF p_trigger = 'schedule' THEN
        SELECT * INTO v_occurrence FROM yuxi.scheduled_job_occurrences
        WHERE job_id = p_job_id AND scheduled_for = p_scheduled_for AND trigger = 'schedule';
        IF FOUND AND v_occurrence.status <> 'pending_retry' THEN
            RETURN yuxi.occurrence_view(v_occurrence);
        ELSIF FOUND THEN
            v_id := v_occurrence.id;  -- a retried slot keeps its occurrence (and request) id
        END IF;
    ELSE
        PERFORM yuxi.job_check_access(v_job.uid, v_job.project_id, v_job.agent_slug);
    END IF;

    v_snapshot := jsonb_build_object(
        'agent_slug', v_job.agent_slug, 'prompt', v_job.prompt,
        'tool_approval_mode', v_job.tool_approval_mode, 'cron', v_job.cron,
        'timezone', v_job.timezone, 'project_id', v_job.project_id);

    IF yuxi.job_busy(p_job_id) THEN
        v_error := 'the previous occurrence is still running';
        INSERT INTO yuxi.scheduled_job_occurrences
            (id, job_id, scheduled_for, trigger, status, config_snapshot, error)
        VALUES (v_id, p_job_id, p_scheduled_for, p_trigger, 'skipped', v_snapshot, v_error)
        ON CONFLICT (job_id, scheduled_for) WHERE trigger = 'schedule'
        DO UPDATE SET status = 'skipped', error = excluded.error, updated_at = clock_timestamp()
        RETURNING * INTO v_occurrence;
    ELSE
        v_error := yuxi.job_access_error(v_job.uid, v_job.project_id, v_job.agent_slug);
        IF v_error IS NULL THEN
            v_thread := (yuxi.thread_create(v_job.uid, v_job.agent_slug, v_job.project_id,
                                            left(btrim(v_job.prompt), 80))).thread_id;
            v_request := (yuxi.request_submit(v_job.uid, v_thread, v_job.prompt, 'sched-' || v_id::text,
                                              'enqueue', NULL, v_job.tool_approval_mode,
                                              'schedule')).request_id;
        END IF;
        INSERT INTO yuxi.scheduled_job_occurrences
            (id, job_id, scheduled_for, trigger, status, config_snapshot, thread_id, request_id, error)
        VALUES (v_id, p_job_id, p_scheduled_for, p_trigger,
                CASE WHEN v_error IS NULL THEN 'submitted' ELSE 'failed' END,
                v_snapshot, v_thread, v_request, v_error)
        ON CONFLICT (job_id, scheduled_for) WHERE trigger = 'schedule'
        DO UPDATE SET status = excluded.status, thread_id = excluded.thread_id,
                      request_id = excluded.request_id, error = excluded.error,
                      config_snapshot = excluded.config_snapshot, updated_at = clock_timestamp()
        RETURNING * INTO v_occurrence;
    END IF;

    UPDATE yuxi.scheduled_agent_jobs
    SET last_fired_at = now(),
        next_fire_at = CASE WHEN p_trigger = 'schedule' THEN coalesce(p_next_fire_at, next_fire_at)
                            ELSE next_fire_at END
    WHERE id = p_job_id;
    RETURN yuxi.occurrence_view(v_occurrence);
END;
$$;
COMMENT ON FUNCTION yuxi.job_fire(uuid, text, timestamptz, timestamptz, uuid) IS
    'Fires a job once for a slot (ticker: schedule; run now: manual): records one occurrence, submitted, skipped or failed. Raises invalid_input (YV001), not_found (YN001)';

-- Records that firing a slot hit an unexpected error; the slot stays due and the next
-- tick tries again (the pending_retry occurrence is then replaced).
CREATE FUNCTION yuxi.job_mark_retry(p_job_id uuid, p_scheduled_for timestamptz, p_error text)
RETURNS void
LANGUAGE sql AS $$
    INSERT INTO yuxi.scheduled_job_occurrences (job_id, scheduled_for, trigger, status, config_snapshot, error)
    SELECT j.id, p_scheduled_for, 'schedule', 'pending_retry',
           jsonb_build_object('agent_slug', j.agent_slug, 'prompt', j.prompt,
                              'tool_approval_mode', j.tool_approval_mode, 'cron', j.cron,
                              'timezone', j.timezone, 'project_id', j.project_id),
           left(p_error, 2000)
    FROM yuxi.scheduled_agent_jobs j WHERE j.id = p_job_id
    ON CONFLICT (job_id, scheduled_for) WHERE trigger = 'schedule'
    DO UPDATE SET error = excluded.error, updated_at = clock_timestamp()
    WHERE yuxi.scheduled_job_occurrences.status = 'pending_retry'
$$;
COMMENT ON FUNCTION yuxi.job_mark_retry(uuid, timestamptz, text) IS
    'Ticker: records that firing a slot hit an unexpected error; the slot stays due';

CREATE FUNCTION yuxi.job_occurrences(p_uid uuid, p_job_id uuid, p_limit integer DEFAULT 100)
RETURNS SETOF yuxi.occurrence_info
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM yuxi.scheduled_agent_jobs
                   WHERE id = p_job_id AND (p_uid IS NULL OR uid = p_uid) AND deleted_at IS NULL) THEN
        RAISE EXCEPTION 'scheduled job % not found', p_job_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN QUERY
    SELECT (yuxi.occurrence_view(o)).*
    FROM yuxi.scheduled_job_occurrences o
    WHERE o.job_id = p_job_id
    ORDER BY o.created_at DESC, o.id
    LIMIT p_limit;
END;
$$;
COMMENT ON FUNCTION yuxi.job_occurrences(uuid, uuid, integer) IS
    'A job''s occurrences, newest first. Raises not_found (YN001)';

-- Operators: jobs that are due now, and jobs whose latest occurrence failed.
CREATE VIEW yuxi.due_jobs AS
SELECT j.id, j.uid, j.agent_slug, j.cron, j.timezone, j.next_fire_at, j.last_fired_at
FROM yuxi.scheduled_agent_jobs j
WHERE j.enabled AND j.deleted_at IS NULL AND j.next_fire_at <= now();
COMMENT ON VIEW yuxi.due_jobs IS
    'Enabled, live scheduled jobs that are due now';

CREATE VIEW yuxi.failing_jobs AS
SELECT j.id, j.uid, j.agent_slug, o.scheduled_for, o.status, o.error, o.created_at AS failed_at
FROM yuxi.scheduled_agent_jobs j
JOIN LATERAL (
    SELECT * FROM yuxi.scheduled_job_occurrences o
    WHERE o.job_id = j.id ORDER BY o.created_at DESC LIMIT 1
) o ON true
WHERE j.deleted_at IS NULL AND o.status IN ('failed', 'pending_retry');
COMMENT ON VIEW yuxi.failing_jobs IS
    'Live scheduled jobs whose latest occurrence failed or waits for a retry';

-- A job whose cron or time zone can no longer be evaluated (edited by hand, or a zone
-- that disappeared): its due slot is recorded failed with the reason and the job is
-- disabled, so it neither blocks the ticker nor fires wrongly.
CREATE FUNCTION yuxi.job_disable_invalid(p_job_id uuid, p_scheduled_for timestamptz, p_error text)
RETURNS void
LANGUAGE sql AS $$
    INSERT INTO yuxi.scheduled_job_occurrences (job_id, scheduled_for, trigger, status, config_snapshot, error)
    SELECT j.id, p_scheduled_for, 'schedule', 'failed',
           jsonb_build_object('agent_slug', j.agent_slug, 'prompt', j.prompt,
                              'tool_approval_mode', j.tool_approval_mode, 'cron', j.cron,
                              'timezone', j.timezone, 'project_id', j.project_id),
           left(p_error || '; the job was disabled', 2000)
    FROM yuxi.scheduled_agent_jobs j WHERE j.id = p_job_id
    ON CONFLICT (job_id, scheduled_for) WHERE trigger = 'schedule'
    DO UPDATE SET status = 'failed', error = excluded.error, updated_at = clock_timestamp();
    UPDATE yuxi.scheduled_agent_jobs SET enabled = false, updated_at = now() WHERE id = p_job_id;
$$;
COMMENT ON FUNCTION yuxi.job_disable_invalid(uuid, timestamptz, text) IS
    'Ticker: records a job''s due slot failed (cron or zone no longer valid) and disables the job';
