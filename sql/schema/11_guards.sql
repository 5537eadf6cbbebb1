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
       OR NEW.attempt_count < OLD.attempt_count OR NEW.last_event_seq < OLD.last_event_seq
       OR NEW.infra_retries < OLD.infra_retries THEN
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
       OR (OLD.run_id IS NOT NULL AND NEW.run_id IS DISTINCT FROM OLD.run_id)
       OR (OLD.metadata ? 'attachments'
           AND NEW.metadata -> 'attachments' IS DISTINCT FROM OLD.metadata -> 'attachments') THEN
        RAISE EXCEPTION 'message % cannot be rewritten', OLD.id
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION yuxi.messages_guard() IS
    'Trigger: refuses rewriting a message, or the attachments it refers to (illegal_transition YT001)';

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
