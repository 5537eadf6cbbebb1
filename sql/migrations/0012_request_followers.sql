-- yuxi: whoever changes a queued request's place, its followers hear of it.
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
