-- yuxi: token usage (yuxi.run_usage, in 02_tables.sql): what runs spent, per model.

-- p_usage ([{model, input_tokens, output_tokens, cached_tokens?, reasoning_tokens?}])
-- priced for user p_uid: each model is the registry's for that user
-- (yuxi.model_for_user); a user's own model is BYOK and never charged, a model without
-- prices (or not registered) has no cost, and cached input tokens cost
-- price_cached_per_mtok (else the input price).
CREATE FUNCTION yuxi.usage_priced(p_uid uuid, p_usage jsonb)
RETURNS TABLE (model text, input_tokens bigint, output_tokens bigint, cached_tokens bigint,
               reasoning_tokens bigint, cost numeric, byok boolean)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_usage IS NULL OR p_usage = '[]' THEN
        RETURN;
    END IF;
    IF jsonb_typeof(p_usage) <> 'array' OR EXISTS (
           SELECT 1 FROM jsonb_array_elements(p_usage) u
           WHERE jsonb_typeof(u) <> 'object' OR u ->> 'model' IS NULL) THEN
        RAISE EXCEPTION 'usage must be a JSON array of objects with a model'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    RETURN QUERY
    SELECT t.model, t.input, t.output, t.cached, t.reasoning,
           CASE WHEN m.id IS NULL OR m.owner_uid IS NOT NULL
                     OR (m.price_input_per_mtok IS NULL AND m.price_output_per_mtok IS NULL) THEN NULL
                ELSE round(((t.input - t.cached) * coalesce(m.price_input_per_mtok, 0)
                            + t.cached * coalesce(m.price_cached_per_mtok, m.price_input_per_mtok, 0)
                            + t.output * coalesce(m.price_output_per_mtok, 0)) / 1000000, 8)
           END,
           coalesce(m.owner_uid IS NOT NULL, false)
    FROM jsonb_array_elements(p_usage) u
    CROSS JOIN LATERAL (SELECT u ->> 'model' AS model,
                               coalesce((u ->> 'input_tokens')::bigint, 0) AS input,
                               coalesce((u ->> 'output_tokens')::bigint, 0) AS output,
                               coalesce((u ->> 'cached_tokens')::bigint, 0) AS cached,
                               coalesce((u ->> 'reasoning_tokens')::bigint, 0) AS reasoning) t
    LEFT JOIN LATERAL yuxi.model_for_user(p_uid, t.model) m ON true;
END;
$$;
COMMENT ON FUNCTION yuxi.usage_priced(uuid, jsonb) IS
    'Internal: token usage per model priced for a user (registry prices; BYOK and unpriced models cost NULL). Raises invalid_input (YV001)';

-- Records p_usage for the locked, finishing run p_run, priced by yuxi.usage_priced. A
-- model already recorded for the run (a retried call) adds up.
CREATE FUNCTION yuxi.run_record_usage(p_run yuxi.agent_runs, p_usage jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_usage IS NULL OR p_usage = '[]' THEN
        RETURN;
    END IF;
    INSERT INTO yuxi.run_usage AS r (run_id, model, uid, thread_id, input_tokens, output_tokens,
                                    cached_tokens, reasoning_tokens, cost, byok)
    SELECT p_run.run_id, p.model, p_run.uid, p_run.thread_id, p.input_tokens, p.output_tokens,
           p.cached_tokens, p.reasoning_tokens, p.cost, p.byok
    FROM yuxi.usage_priced(p_run.uid, p_usage) p
    ON CONFLICT (run_id, model) DO UPDATE SET
        input_tokens = r.input_tokens + excluded.input_tokens,
        output_tokens = r.output_tokens + excluded.output_tokens,
        cached_tokens = r.cached_tokens + excluded.cached_tokens,
        reasoning_tokens = r.reasoning_tokens + excluded.reasoning_tokens,
        cost = CASE WHEN r.cost IS NULL AND excluded.cost IS NULL THEN NULL
                    ELSE coalesce(r.cost, 0) + coalesce(excluded.cost, 0) END;
END;
$$;
COMMENT ON FUNCTION yuxi.run_record_usage(yuxi.agent_runs, jsonb) IS
    'Internal (yuxi.run_finish): records and prices a finishing run''s usage per model (registry prices; BYOK never charged). Raises invalid_input (YV001)';

-- Usage rows summed: {input_tokens, output_tokens, cached_tokens, reasoning_tokens,
-- total_tokens, cost, by_model: [{model, ..., cost, byok}]}; cost is NULL when no row
-- has one.
CREATE FUNCTION yuxi.usage_json(p_rows yuxi.run_usage[]) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF cardinality(p_rows) = 0 THEN
        RETURN NULL;
    END IF;
    RETURN (
        SELECT jsonb_build_object(
            'input_tokens', sum(m.input_tokens), 'output_tokens', sum(m.output_tokens),
            'cached_tokens', sum(m.cached_tokens), 'reasoning_tokens', sum(m.reasoning_tokens),
            'total_tokens', sum(m.input_tokens + m.output_tokens), 'cost', sum(m.cost),
            'by_model', jsonb_agg(jsonb_build_object(
                              'model', m.model, 'input_tokens', m.input_tokens,
                              'output_tokens', m.output_tokens, 'cached_tokens', m.cached_tokens,
                              'reasoning_tokens', m.reasoning_tokens,
                              'total_tokens', m.input_tokens + m.output_tokens,
                              'cost', m.cost, 'byok', m.byok) ORDER BY m.model))
        FROM (SELECT x.model, sum(x.input_tokens) AS input_tokens,
                     sum(x.output_tokens) AS output_tokens,
                     sum(x.cached_tokens) AS cached_tokens,
                     sum(x.reasoning_tokens) AS reasoning_tokens,
                     sum(x.cost) AS cost, bool_or(x.byok) AS byok
              FROM unnest(p_rows) x GROUP BY x.model) m);
END;
$$;
COMMENT ON FUNCTION yuxi.usage_json(yuxi.run_usage[]) IS
    'Internal: usage rows summed, with a per-model breakdown (by_model); NULL for none';

CREATE FUNCTION yuxi.run_usage_json(p_run_id uuid) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN yuxi.usage_json(ARRAY(SELECT u FROM yuxi.run_usage u WHERE u.run_id = p_run_id));
END;
$$;
COMMENT ON FUNCTION yuxi.run_usage_json(uuid) IS
    'A run''s usage as the API shows it ({input_tokens, output_tokens, total_tokens, cost, by_model}), NULL before its finish recorded any';

-- A live thread's usage, every run of it (subagent runs included). Raises not_found.
CREATE FUNCTION yuxi.thread_usage(p_uid uuid, p_thread_id uuid) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM yuxi.thread_get(p_uid, p_thread_id);
    RETURN coalesce(
        -- by the thread's runs (agent_runs_thread_idx), then each run's rows: a finish
        -- writes no index of run_usage by thread
        yuxi.usage_json(ARRAY(SELECT u FROM yuxi.agent_runs r
                              JOIN yuxi.run_usage u ON u.run_id = r.run_id
                              WHERE r.thread_id = p_thread_id)),
        jsonb_build_object('input_tokens', 0, 'output_tokens', 0, 'cached_tokens', 0,
                           'reasoning_tokens', 0, 'total_tokens', 0, 'cost', NULL,
                           'by_model', '[]'::jsonb));
END;
$$;
COMMENT ON FUNCTION yuxi.thread_usage(uuid, uuid) IS
    'The usage of every run of a live thread of the user, summed and per model. Raises not_found (YN001)';

-- Usage per user, UTC day and model in [p_since, p_until): one user's (p_uid), or
-- everyone's (p_uid NULL: for admins).
CREATE FUNCTION yuxi.usage_report(p_uid uuid, p_since timestamptz, p_until timestamptz)
RETURNS TABLE (uid uuid, day date, model text, runs bigint, input_tokens bigint,
               output_tokens bigint, cached_tokens bigint, reasoning_tokens bigint,
               total_tokens bigint, cost numeric)
LANGUAGE sql STABLE AS $$
    SELECT u.uid, (u.created_at AT TIME ZONE 'UTC')::date, u.model, count(*),
           sum(u.input_tokens)::bigint, sum(u.output_tokens)::bigint, sum(u.cached_tokens)::bigint,
           sum(u.reasoning_tokens)::bigint, sum(u.input_tokens + u.output_tokens)::bigint, sum(u.cost)
    FROM yuxi.run_usage u
    WHERE (p_uid IS NULL OR u.uid = p_uid) AND u.created_at >= p_since AND u.created_at < p_until
    GROUP BY 1, 2, 3
    ORDER BY 2, 1, 3
$$;
COMMENT ON FUNCTION yuxi.usage_report(uuid, timestamptz, timestamptz) IS
    'Usage per user, UTC day and model between p_since (inclusive) and p_until: one user''s, or everyone''s with p_uid NULL';
