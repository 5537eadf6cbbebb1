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
    deleted_at        timestamptz,
    -- the version the agent is at (yuxi.agent_versions): a new one with each change of
    -- its name, description, backend, configuration or metadata
    version           integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    -- free metadata (the LangGraph API's assistant metadata)
    metadata          jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object')
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

-- Every version of an agent: what it was named, described, built from and configured
-- with. Written by the triggers on yuxi.agents only (04_agents.sql), whoever changes it.
CREATE TABLE yuxi.agent_versions (
    agent_slug   text NOT NULL REFERENCES yuxi.agents (slug) ON DELETE CASCADE,
    version      integer NOT NULL CHECK (version >= 1),
    name         text NOT NULL,
    description  text NOT NULL,
    backend_id   text NOT NULL,
    config_json  jsonb NOT NULL,
    metadata     jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (agent_slug, version)
);
COMMENT ON TABLE yuxi.agent_versions IS
    'The history of an agent: one row per version of its name, description, backend, config and metadata (written by triggers on yuxi.agents)';

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

-- The model registry (functions in 18_models.sql): platform models (owner_uid NULL,
-- managed by admins) and users' own models (BYOK). Keys are stored sealed with
-- AES-256-GCM under the server key and bound to the model's id
-- (yuxi/models/secret_box.py): PostgreSQL never sees a key in the clear, so no
-- statement log, pg_stat_statements entry or dump holds one.
CREATE TABLE yuxi.models (
    id                     uuid PRIMARY KEY,
    owner_uid              uuid REFERENCES yuxi.users (id) ON DELETE CASCADE,
    spec                   text NOT NULL CHECK (spec ~ '^[a-z][a-z0-9_-]*:[^[:space:]]+$' AND length(spec) <= 200),
    name                   text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    base_url               text CHECK (base_url ~ '^https?://[^[:space:]]+$' AND length(base_url) <= 500),
    api_key_sealed         bytea,
    api_key_hint           text CHECK (length(api_key_hint) <= 4),
    streaming              boolean NOT NULL DEFAULT true,
    function_calling       boolean NOT NULL DEFAULT true,
    vision                 boolean NOT NULL DEFAULT false,
    json_mode              boolean NOT NULL DEFAULT false,
    context_window         integer CHECK (context_window > 0),
    max_tokens             integer CHECK (max_tokens > 0),
    temperature            double precision CHECK (temperature BETWEEN 0 AND 2),
    top_p                  double precision CHECK (top_p > 0 AND top_p <= 1),
    price_input_per_mtok   numeric(14, 6) CHECK (price_input_per_mtok >= 0),
    price_output_per_mtok  numeric(14, 6) CHECK (price_output_per_mtok >= 0),
    price_cached_per_mtok  numeric(14, 6) CHECK (price_cached_per_mtok >= 0),
    enabled                boolean NOT NULL DEFAULT true,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    CHECK ((api_key_sealed IS NULL) = (api_key_hint IS NULL))
);
CREATE UNIQUE INDEX models_platform_spec_key ON yuxi.models (spec) WHERE owner_uid IS NULL;
CREATE UNIQUE INDEX models_owner_spec_key ON yuxi.models (owner_uid, spec) WHERE owner_uid IS NOT NULL;
COMMENT ON TABLE yuxi.models IS
    'The model registry: platform models (owner_uid NULL, admins) and users'' own models (BYOK). Keys are sealed by the server key, never stored in the clear';
COMMENT ON COLUMN yuxi.models.api_key_sealed IS
    'The API key sealed with AES-256-GCM under the server key, bound to the model id (yuxi/models/secret_box.py)';
COMMENT ON COLUMN yuxi.models.api_key_hint IS 'The key''s last 4 characters at most, to tell keys apart';

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
    -- the last event batch the current attempt appended (run_append_batch); each claim
    -- resets it, so a batch re-sent after a lost reply is recognised and skipped
    last_event_batch      bigint NOT NULL DEFAULT 0,
    -- attempts given back for a cause outside the agent: a lost lease, a lost database
    -- connection, a worker shutting down (they do not spend agents.max_run_attempts)
    infra_retries         integer NOT NULL DEFAULT 0 CHECK (infra_retries >= 0),
    CHECK ((run_type = 'chat') = (created_by_run_id IS NULL)),
    CHECK ((manifest IS NULL) = (manifest_fingerprint IS NULL)),
    -- a lease exists exactly while a worker executes the run
    CHECK (yuxi.run_is_leased(status) = (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)),
    -- a run that no longer holds its thread has ended, for now (interrupted) or for good
    CHECK (yuxi.run_is_active(status) = (finished_at IS NULL))
)
-- room on each page for a run's updates that change no indexed column (its manifest, its
-- event batches) to be HOT: written beside the row, no index touched
WITH (fillfactor = 70);
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
COMMENT ON COLUMN yuxi.agent_runs.last_event_batch IS
    'The number of the last event batch the current attempt appended (yuxi.run_append_batch); reset by each claim';
COMMENT ON COLUMN yuxi.agent_runs.infra_retries IS
    'Attempts given back for a cause outside the agent (lost lease, lost database connection, worker shutdown), limited by the workers'' YUXI_INFRA_RETRIES, not by agents.max_run_attempts';

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

-- Tokens a run spent, per model (the main model, and any other it called), written with
-- the run's finish in the same transaction (yuxi.run_finish); an attempt that ends
-- without a finish (lease lost, released) records none. cost is NULL for a model
-- without prices and for a user's own model (BYOK runs are never charged).
CREATE TABLE yuxi.run_usage (
    run_id            uuid NOT NULL REFERENCES yuxi.agent_runs (run_id) ON DELETE CASCADE,
    model             text NOT NULL CHECK (length(model) BETWEEN 1 AND 200),
    uid               uuid NOT NULL,
    thread_id         uuid NOT NULL,
    input_tokens      bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens     bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cached_tokens     bigint NOT NULL DEFAULT 0 CHECK (cached_tokens >= 0),
    reasoning_tokens  bigint NOT NULL DEFAULT 0 CHECK (reasoning_tokens >= 0),
    cost              numeric(20, 8) CHECK (cost >= 0),
    byok              boolean NOT NULL DEFAULT false,
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, model)
);
CREATE INDEX run_usage_uid_idx ON yuxi.run_usage (uid, created_at);
COMMENT ON TABLE yuxi.run_usage IS
    'Tokens and cost of each finished run, per model, written by yuxi.run_finish in its transaction';
COMMENT ON COLUMN yuxi.run_usage.cost IS
    'In the registry''s price unit (prices per million tokens); NULL without prices and for BYOK models';

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

-- The tool calls of a run whose effect was applied, by the model's tool call id: a later
-- attempt of the run that makes the same call again (it resumed before the call's result
-- reached the checkpoint) gets the recorded result instead of applying it twice. Written
-- in the transaction of the effect itself where the effect is in the database (memory).
CREATE TABLE yuxi.run_tool_calls (
    run_id      uuid NOT NULL REFERENCES yuxi.agent_runs (run_id) ON DELETE CASCADE,
    call_id     text NOT NULL CHECK (length(call_id) BETWEEN 1 AND 200),
    tool        text NOT NULL CHECK (length(tool) BETWEEN 1 AND 200),
    attempt_no  integer NOT NULL CHECK (attempt_no >= 1),
    result      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (run_id, call_id)
);
COMMENT ON TABLE yuxi.run_tool_calls IS
    'Side-effecting tool calls a run applied, by tool call id, with their result: applied at most once across attempts (yuxi.run_tool_call_record)';

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

-- What the maintenance passes did, for operators' metrics. Each count is incremented
-- in the transaction that does the work (yuxi.maintenance_count), so it never disagrees
-- with the rows; values only grow, from the database's creation.
CREATE TABLE yuxi.maintenance_counters (
    name   text PRIMARY KEY CHECK (name ~ '^[a-z][a-z_]{0,62}$'),
    value  bigint NOT NULL DEFAULT 0 CHECK (value >= 0)
);
INSERT INTO yuxi.maintenance_counters (name, value) VALUES
    ('lease_expired', 0),
    ('lease_released', 0),
    ('redelivered_missing', 0),
    ('redelivered_stalled', 0),
    ('released_after_error', 0),
    ('delivery_pruned', 0),
    ('released_after_agent_error', 0);
COMMENT ON TABLE yuxi.maintenance_counters IS
    'Counts of maintenance work since the database was created: lease_expired (leases the reconciler ended), lease_released (of those, runs put back to pending for another attempt), redelivered_missing (pending runs re-delivered because their job was missing or finished), redelivered_stalled (pending runs re-delivered because their job''s worker stopped), released_after_error (runs a worker gave back for another attempt after losing its database connection, yuxi.run_retry), delivery_pruned (finished or abandoned procrastinate jobs deleted, yuxi.delivery_prune), released_after_agent_error (runs a worker gave back for another attempt within their agent''s max_run_attempts after the agent, its model or a tool failed, yuxi.run_retry)';

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
    updated_at     timestamptz,
    workdir        text
);
COMMENT ON TYPE yuxi.thread_info IS
    'A thread as the API shows it; thread_status is loading, ready or done; workdir is relative to the user''s workspace';

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
