-- yuxi: metrics, what GET /metrics reads from the database at scrape time.
--
-- One function returns every database-derived metric, so a scrape is one round trip
-- and an operator sees the same figures with `SELECT * FROM yuxi.metrics_snapshot()`.
-- It has to stay cheap on a database with millions of runs, scraped every 15 s by
-- every API process: each part reads a partial index whose size is bounded by what is
-- in flight (pending, leased, queued, paused), never the history. Outcomes of finished
-- runs are therefore not counted here: workers count them as they happen
-- (yuxi_worker_run_duration_seconds, yuxi/worker/metrics.py). The cost is measured in
-- docs/benchmarks.md (metrics_snapshot).

-- Threads whose backlog is paused by a run. Only set while a backlog waits, so the
-- index stays small; updates that leave the column as it was stay HOT.
CREATE INDEX conversations_paused_idx ON yuxi.conversations (thread_id)
    WHERE paused_by_run_id IS NOT NULL AND status = 'active';

-- Interrupted runs, by run_id. A resumed run stays interrupted, so this holds every
-- interrupt ever made; the snapshot finds the ones not resumed by an anti-join of this
-- index with agent_runs_one_resume_key, both read whole but index-only (a few hundred
-- entries a page), instead of one lookup of each interrupted run's thread.
CREATE INDEX agent_runs_interrupted_idx ON yuxi.agent_runs (run_id) INCLUDE (thread_id)
    WHERE status = 'interrupted' AND run_type <> 'subagent';

-- Occurrences by creation time, for the last hour's fires (a few rows per job and hour).
CREATE INDEX scheduled_job_occurrences_created_idx
    ON yuxi.scheduled_job_occurrences (created_at);

-- Rows (metric, type, help, labels, value): metric is the sample name as exposed
-- (a counter's ends in _total), type is gauge or counter. Every label value a metric
-- can take is listed, with 0 when nothing has it, so series do not appear and vanish.
CREATE FUNCTION yuxi.metrics_snapshot(p_now timestamptz DEFAULT NULL)
RETURNS TABLE (metric text, type text, help text, labels jsonb, value double precision)
LANGUAGE plpgsql STABLE
-- PL/pgSQL, not an inlined SQL function, so that these settings apply and the query's
-- plan is cached per connection. The estimated cost grows with the tables although
-- what the query reads does not: past jit_above_cost, JIT (on by default where
-- PostgreSQL has LLVM, e.g. 15 on Debian) compiled it on every call, 75 ms instead of
-- 3 ms at 100,000 runs. A custom plan per call re-planned it every time (2-3 ms); the
-- generic plan is the same plan, as p_now only bounds ranges.
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
        WITH clock AS (
            SELECT coalesce(p_now, clock_timestamp()) AS now
        ),
        -- the threads that can be anything but ready; their status comes from the view
        -- that defines it, yuxi.thread_queues
        busy_threads AS (
            SELECT r.thread_id FROM yuxi.agent_runs r
            WHERE yuxi.run_is_active(r.status) AND r.run_type <> 'subagent'
            UNION
            SELECT q.thread_id FROM yuxi.agent_run_requests q WHERE q.status = 'queued'
            UNION
            SELECT c.thread_id FROM yuxi.conversations c
            WHERE c.paused_by_run_id IS NOT NULL AND c.status = 'active'
            UNION
            SELECT r.thread_id FROM yuxi.agent_runs r
            WHERE r.status = 'interrupted' AND r.run_type <> 'subagent'
              AND NOT EXISTS (SELECT 1 FROM yuxi.agent_runs c
                              WHERE c.created_by_run_id = r.run_id AND c.run_type = 'resume')
        ),
        -- one lookup of the view per candidate (OFFSET 0 keeps the planner from joining the
        -- view's tables whole, which it may prefer on a small database)
        thread_states AS (
            SELECT t.status, t.paused_reason, count(*) AS n
            FROM busy_threads b
            CROSS JOIN LATERAL (SELECT q.status, q.paused_reason FROM yuxi.thread_queues q
                                WHERE q.thread_id = b.thread_id OFFSET 0) t
            WHERE t.status <> 'ready'
            GROUP BY t.status, t.paused_reason
        ),
        queued AS (
            SELECT count(*) AS n, min(q.created_at) AS oldest
            FROM yuxi.agent_run_requests q WHERE q.status = 'queued'
        ),
        delivery_jobs AS (
            SELECT j.status, count(*) AS n FROM public.procrastinate_jobs j
            WHERE j.queue_name = 'yuxi_runs' GROUP BY j.status
        ),
        recent_occurrences AS (
            SELECT o.status, count(*) AS n FROM yuxi.scheduled_job_occurrences o, clock
            WHERE o.created_at > clock.now - interval '1 hour' GROUP BY o.status
        )
        SELECT 'yuxi_runs', 'gauge',
               'Runs that are pending, running or cancel_requested (subagent runs included)',
               jsonb_build_object('status', s.status), s.n::float8
        -- each count names its status as a constant, so that it reads the partial index of
        -- that status (agent_runs_pending_idx, agent_runs_lease_idx)
        FROM (VALUES ('pending', (SELECT count(*) FROM yuxi.agent_runs r WHERE r.status = 'pending')),
                     ('running', (SELECT count(*) FROM yuxi.agent_runs r WHERE r.status = 'running')),
                     ('cancel_requested', (SELECT count(*) FROM yuxi.agent_runs r
                                           WHERE r.status = 'cancel_requested'))) AS s (status, n)
        UNION ALL
        SELECT 'yuxi_run_oldest_pending_age_seconds', 'gauge',
               'Seconds since the oldest pending run was created (0: none pending)',
               '{}',
               coalesce(extract(epoch FROM (SELECT clock.now FROM clock)
                                           - (SELECT min(r.created_at) FROM yuxi.agent_runs r
                                              WHERE r.status = 'pending')), 0)::float8
        UNION ALL
        SELECT 'yuxi_runs_undelivered', 'gauge',
               'Pending runs whose delivery job is gone (the recovery scan re-delivers them)',
               '{}', (SELECT count(*) FROM yuxi.undelivered_runs)::float8
        UNION ALL
        SELECT 'yuxi_run_leases_expired', 'gauge',
               'Running or cancel_requested runs whose lease has expired and that the reconciler has not ended yet',
               '{}',
               (SELECT count(*) FROM yuxi.agent_runs r, clock
                WHERE yuxi.run_is_leased(r.status) AND r.lease_expires_at <= clock.now)::float8
        UNION ALL
        SELECT 'yuxi_requests_queued', 'gauge', 'Requests waiting in their thread''s queue',
               '{}', (SELECT n FROM queued)::float8
        UNION ALL
        SELECT 'yuxi_request_oldest_queued_age_seconds', 'gauge',
               'Seconds the oldest queued request has waited (0: none queued)',
               '{}',
               coalesce(extract(epoch FROM (SELECT clock.now FROM clock) - (SELECT oldest FROM queued)),
                        0)::float8
        UNION ALL
        SELECT 'yuxi_threads', 'gauge',
               'Live threads that are running (an active run), interrupted (waiting for a resume) or paused (a backlog that waits for continue)',
               jsonb_build_object('status', s.status),
               coalesce((SELECT sum(t.n) FROM thread_states t WHERE t.status = s.status), 0)::float8
        FROM unnest(ARRAY['running', 'interrupted', 'paused']) AS s (status)
        UNION ALL
        SELECT 'yuxi_threads_paused', 'gauge',
               'Paused threads by reason: run_failed, run_cancelled (the run that paused the backlog), stalled (a backlog with nothing paused or running)',
               jsonb_build_object('reason', s.reason),
               coalesce((SELECT sum(t.n) FROM thread_states t
                         WHERE t.status = 'paused' AND t.paused_reason = s.reason), 0)::float8
        FROM (SELECT unnest(ARRAY['run_failed', 'run_cancelled', 'stalled'])
              UNION
              SELECT t.paused_reason FROM thread_states t WHERE t.status = 'paused') AS s (reason)
        UNION ALL
        SELECT 'yuxi_maintenance_events_total', 'counter',
               'Maintenance work since the database was created (yuxi.maintenance_counters): lease_expired, lease_released, redelivered_missing, redelivered_stalled',
               jsonb_build_object('event', m.name), m.value::float8
        FROM yuxi.maintenance_counters m
        UNION ALL
        SELECT 'yuxi_delivery_jobs', 'gauge',
               'procrastinate jobs on queue yuxi_runs (run deliveries) by status; succeeded jobs are deleted',
               jsonb_build_object('status', s.status::text), coalesce(d.n, 0)::float8
        FROM unnest(enum_range(NULL::public.procrastinate_job_status)) AS s (status)
        LEFT JOIN delivery_jobs d ON d.status = s.status
        UNION ALL
        SELECT 'yuxi_workers', 'gauge',
               'procrastinate workers that sent a heartbeat in the last minute',
               '{}',
               (SELECT count(*) FROM public.procrastinate_workers w, clock
                WHERE w.last_heartbeat > clock.now - interval '1 minute')::float8
        UNION ALL
        SELECT 'yuxi_scheduled_occurrences_last_hour', 'gauge',
               'Scheduled job occurrences created in the last hour by status: submitted (fired), skipped, failed, pending_retry',
               jsonb_build_object('status', s.status), coalesce(o.n, 0)::float8
        FROM unnest(ARRAY['submitted', 'skipped', 'failed', 'pending_retry']) AS s (status)
        LEFT JOIN recent_occurrences o ON o.status = s.status
        UNION ALL
        SELECT 'yuxi_scheduled_job_oldest_due_age_seconds', 'gauge',
               'Seconds the most overdue enabled job has been due without firing (0: none due; the ticker runs every YUXI_MAINTENANCE_SECONDS)',
               '{}',
               coalesce(extract(epoch FROM (SELECT clock.now FROM clock)
                                           - (SELECT min(j.next_fire_at) FROM yuxi.scheduled_agent_jobs j, clock
                                              WHERE j.enabled AND j.deleted_at IS NULL
                                                AND j.next_fire_at <= clock.now)), 0)::float8;
END;
$$;
COMMENT ON FUNCTION yuxi.metrics_snapshot(timestamptz) IS
    'The database-derived metrics GET /metrics exposes, as rows (metric, type, help, labels, value): runs in flight, queues, thread states, lease and delivery health, maintenance counters, delivery jobs, workers, scheduled fires. Reads only partial indexes of what is in flight; safe to call from psql';
