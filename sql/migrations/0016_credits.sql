-- Budgets: credit accounts, their ledger and the holds of runs (24_credits.sql); the
-- claim freezes (yuxi.run_claim_execution returns credit_hold and credit_error), a
-- trigger settles when a run ends, and yuxi.run_finish records usage before the status
-- changes so that the settlement sees it. Pricing moves into yuxi.usage_priced, shared
-- by yuxi.run_record_usage and yuxi.credit_refreeze.
--
-- A user message records the attachments it refers to (yuxi.message_refer_attachments,
-- kept by yuxi.messages_guard), and yuxi.run_execution_input returns them
-- (input_attachments): a model with vision gets the images.

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
CREATE OR REPLACE FUNCTION yuxi.run_record_usage(p_run yuxi.agent_runs, p_usage jsonb) RETURNS void
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

-- one has no budget and is never stopped). The balance changes only by rows appended to
-- the ledger (yuxi.credit_ledger), so it always equals the sum of the user's ledger
-- deltas, and a CHECK keeps it from going negative.
--
-- A run on a priced platform model freezes an estimate of one model call when it is
-- claimed (yuxi.credit_freeze, from yuxi.run_claim_execution): the balance goes down by
-- it and yuxi.credit_holds remembers it. Before each further model call the worker
-- extends the freeze to what the run has spent plus one more call
-- (yuxi.credit_refreeze); a freeze that the balance cannot cover refuses the call:
-- the run fails with insufficient_credits and nothing more is spent. When the run ends
-- (completed, interrupted, failed, cancelled; by its worker, the reconciler or psql) a
-- trigger settles the hold exactly once: the freeze is released and the run's recorded
-- cost (yuxi.run_usage, written by the same finish) is charged. BYOK runs and models
-- without prices are never frozen or charged.
--
-- Lock order: the run (and its conversation) first, then the user's credit account.

-- One call's estimate: max_tokens (4096 when unset) of input and as many of output.
CREATE FUNCTION yuxi.credit_estimate(p_model yuxi.models) RETURNS numeric
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN p_model.id IS NULL OR p_model.owner_uid IS NOT NULL
             OR coalesce(p_model.price_input_per_mtok, 0) + coalesce(p_model.price_output_per_mtok, 0) = 0 THEN NULL
        -- never 0 for a priced model: a run is charged only through a hold
        ELSE greatest(round(coalesce(p_model.max_tokens, 4096)
                            * (coalesce(p_model.price_input_per_mtok, 0) + coalesce(p_model.price_output_per_mtok, 0))
                            / 1000000, 8), 0.00000001)
    END
$$;
COMMENT ON FUNCTION yuxi.credit_estimate(yuxi.models) IS
    'What one call of a model is frozen at: max_tokens (4096 when unset) input and output tokens at its prices; NULL for a model that is never charged (BYOK, no or zero prices)';

CREATE TABLE yuxi.credit_accounts (
    uid         uuid PRIMARY KEY REFERENCES yuxi.users (id) ON DELETE CASCADE,
    balance     numeric(20, 8) NOT NULL DEFAULT 0 CHECK (balance >= 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE yuxi.credit_accounts IS
    'A user''s credit balance (what is left after the freezes of running runs); a user without a row has no budget. Changed only through yuxi.credit_ledger';

CREATE TABLE yuxi.credit_ledger (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    uid            uuid NOT NULL REFERENCES yuxi.credit_accounts (uid) ON DELETE CASCADE,
    kind           text NOT NULL CHECK (kind IN ('topup', 'adjust', 'freeze', 'release', 'charge')),
    delta          numeric(20, 8) NOT NULL CHECK (delta <> 0),
    balance_after  numeric(20, 8) NOT NULL DEFAULT 0,
    run_id         uuid,
    actor_uid      uuid,
    reason         text CHECK (length(reason) <= 500),
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX credit_ledger_uid_idx ON yuxi.credit_ledger (uid, id);
COMMENT ON TABLE yuxi.credit_ledger IS
    'Every change of a credit balance, append-only: top-ups and adjustments (actor_uid: the admin), a run''s freezes, their release and its charge (run_id)';
COMMENT ON COLUMN yuxi.credit_ledger.balance_after IS 'The balance once this row was applied';

-- Each ledger row moves its account's balance (the CHECK there refuses a negative one).
CREATE FUNCTION yuxi.credit_ledger_apply() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        -- the rows go only with their account (ON DELETE CASCADE from yuxi.credit_accounts)
        IF pg_trigger_depth() < 2 THEN
            RAISE EXCEPTION 'the credit ledger is append-only'
                USING ERRCODE = 'YT001', HINT = 'illegal_transition';
        END IF;
        RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
    END IF;
    UPDATE yuxi.credit_accounts SET balance = balance + NEW.delta, updated_at = NEW.created_at
    WHERE uid = NEW.uid
    RETURNING balance INTO NEW.balance_after;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION yuxi.credit_ledger_apply() IS
    'Trigger: a new ledger row moves its account''s balance; rows are never changed or removed but with their account';
CREATE TRIGGER credit_ledger_apply
    BEFORE INSERT OR UPDATE OR DELETE ON yuxi.credit_ledger
    FOR EACH ROW EXECUTE FUNCTION yuxi.credit_ledger_apply();

-- A balance starts at 0 and moves only by the ledger's trigger.
CREATE FUNCTION yuxi.credit_accounts_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' AND NEW.balance <> 0 THEN
        RAISE EXCEPTION 'a credit account starts at 0; add credits through yuxi.credit_add'
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.balance IS DISTINCT FROM OLD.balance AND pg_trigger_depth() < 2 THEN
        RAISE EXCEPTION 'a credit balance changes only through its ledger (yuxi.credit_add)'
            USING ERRCODE = 'YT001', HINT = 'illegal_transition';
    END IF;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION yuxi.credit_accounts_guard() IS
    'Trigger: a balance starts at 0 and changes only by a ledger row (illegal_transition YT001)';
CREATE TRIGGER credit_accounts_guard
    BEFORE INSERT OR UPDATE ON yuxi.credit_accounts
    FOR EACH ROW EXECUTE FUNCTION yuxi.credit_accounts_guard();

-- What a run has frozen, and how it ended. A hold goes with its run; one still held
-- then is released first (yuxi.credit_holds_release).
CREATE TABLE yuxi.credit_holds (
    run_id      uuid PRIMARY KEY REFERENCES yuxi.agent_runs (run_id) ON DELETE CASCADE,
    uid         uuid NOT NULL REFERENCES yuxi.credit_accounts (uid) ON DELETE CASCADE,
    amount      numeric(20, 8) NOT NULL CHECK (amount > 0),
    status      text NOT NULL DEFAULT 'held' CHECK (status IN ('held', 'settled', 'released')),
    charged     numeric(20, 8) CHECK (charged >= 0),
    unpaid      numeric(20, 8) CHECK (unpaid >= 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    settled_at  timestamptz,
    CHECK ((status = 'held') = (settled_at IS NULL))
);
CREATE INDEX credit_holds_held_idx ON yuxi.credit_holds (uid) WHERE status = 'held';
COMMENT ON TABLE yuxi.credit_holds IS
    'Credits frozen by a run (amount), then settled once when it ends: charged its recorded cost (unpaid: what the balance could not cover), or released';

-- Adds p_amount (negative: removes) to a user's balance, opening the account at the
-- first call; by an admin (p_actor) or an operator (NULL). A balance never goes below 0.
CREATE FUNCTION yuxi.credit_add(
    p_uid uuid, p_amount numeric, p_actor uuid DEFAULT NULL, p_reason text DEFAULT NULL
) RETURNS numeric
LANGUAGE plpgsql AS $$
DECLARE
    v_balance numeric;
BEGIN
    IF p_amount IS NULL OR p_amount = 0 OR p_amount <> round(p_amount, 8) THEN
        RAISE EXCEPTION 'the amount must be a non-zero number with at most 8 decimals'
            USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF length(p_reason) > 500 THEN
        RAISE EXCEPTION 'the reason is at most 500 characters' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM yuxi.users WHERE id = p_uid AND deleted_at IS NULL) THEN
        RAISE EXCEPTION 'user % not found', p_uid USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    INSERT INTO yuxi.credit_accounts (uid) VALUES (p_uid) ON CONFLICT (uid) DO NOTHING;
    SELECT balance INTO v_balance FROM yuxi.credit_accounts WHERE uid = p_uid FOR UPDATE;
    IF v_balance + p_amount < 0 THEN
        RAISE EXCEPTION 'insufficient credits: the balance is %, it cannot lose %', v_balance, -p_amount
            USING ERRCODE = 'YB001', HINT = 'insufficient_credits';
    END IF;
    INSERT INTO yuxi.credit_ledger (uid, kind, delta, actor_uid, reason)
    VALUES (p_uid, CASE WHEN p_amount > 0 THEN 'topup' ELSE 'adjust' END, p_amount, p_actor, p_reason)
    RETURNING balance_after INTO v_balance;
    RETURN v_balance;
END;
$$;
COMMENT ON FUNCTION yuxi.credit_add(uuid, numeric, uuid, text) IS
    'Tops up (p_amount > 0) or lowers a user''s credit balance, as a ledger row; opens the account. Raises invalid_input (YV001), not_found (YN001), insufficient_credits (YB001)';

-- A user's budget: {balance, frozen, ledger_sum, ledger: [newest p_limit rows]}, or NULL
-- for a user without one.
CREATE FUNCTION yuxi.credit_report(p_uid uuid, p_limit integer DEFAULT 50) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    -- amounts as decimal text: exact, where a JSON number would be read as a float
    SELECT jsonb_build_object(
        'balance', a.balance::text,
        'frozen', coalesce((SELECT sum(h.amount) FROM yuxi.credit_holds h
                            WHERE h.uid = a.uid AND h.status = 'held'), 0)::text,
        'updated_at', a.updated_at,
        'ledger', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                'id', l.id, 'kind', l.kind, 'delta', l.delta::text,
                                'balance_after', l.balance_after::text, 'run_id', l.run_id,
                                'actor_uid', l.actor_uid, 'reason', l.reason,
                                'created_at', l.created_at) ORDER BY l.id DESC)
                            FROM (SELECT * FROM yuxi.credit_ledger l WHERE l.uid = a.uid
                                  ORDER BY l.id DESC LIMIT greatest(p_limit, 0)) l), '[]'))
    FROM yuxi.credit_accounts a WHERE a.uid = p_uid
$$;
COMMENT ON FUNCTION yuxi.credit_report(uuid, integer) IS
    'A user''s budget: balance, what running runs hold frozen, and the newest ledger rows (amounts as decimal text); NULL without a budget';

-- Accounts whose balance is not the sum of their ledger (empty unless a row was forced
-- around the triggers): what an operator checks.
CREATE VIEW yuxi.credit_mismatches AS
SELECT a.uid, a.balance, coalesce(l.total, 0) AS ledger_sum
FROM yuxi.credit_accounts a
LEFT JOIN (SELECT uid, sum(delta) AS total FROM yuxi.credit_ledger GROUP BY uid) l ON l.uid = a.uid
WHERE a.balance <> coalesce(l.total, 0);
COMMENT ON VIEW yuxi.credit_mismatches IS
    'Credit accounts whose balance differs from the sum of their ledger (none, by construction)';

-- The claim's freeze for run p_run_id of p_uid on model p_model (the registry row as
-- yuxi.run_execution_input returns it): returns the amount the run holds (NULL: no
-- budget applies), or the reason it cannot be frozen. A run claimed again (another
-- attempt) keeps the hold it has.
CREATE FUNCTION yuxi.credit_freeze(
    p_run_id uuid, p_uid uuid, p_model jsonb, OUT hold numeric, OUT error text
)
LANGUAGE plpgsql AS $$
DECLARE
    v_estimate numeric;
    v_balance numeric;
BEGIN
    IF p_model IS NULL THEN
        RETURN;
    END IF;
    v_estimate := yuxi.credit_estimate(jsonb_populate_record(NULL::yuxi.models, p_model));
    IF v_estimate IS NULL THEN
        RETURN;
    END IF;
    SELECT balance INTO v_balance FROM yuxi.credit_accounts WHERE uid = p_uid FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT h.amount INTO hold FROM yuxi.credit_holds h WHERE h.run_id = p_run_id AND h.status = 'held';
    IF FOUND THEN
        RETURN;
    END IF;
    IF v_balance < v_estimate THEN
        error := format('insufficient credits: a call of %s is frozen at %s, the balance is %s',
                        p_model ->> 'spec', v_estimate, v_balance);
        RETURN;
    END IF;
    INSERT INTO yuxi.credit_ledger (uid, kind, delta, run_id, reason)
    VALUES (p_uid, 'freeze', -v_estimate, p_run_id, 'frozen when the run was claimed');
    INSERT INTO yuxi.credit_holds (run_id, uid, amount) VALUES (p_run_id, p_uid, v_estimate);
    hold := v_estimate;
END;
$$;
COMMENT ON FUNCTION yuxi.credit_freeze(uuid, uuid, jsonb) IS
    'Internal (yuxi.run_claim_execution): freezes one call''s estimate for a claimed run on a priced platform model of a user with a budget; returns the hold, or why it cannot be frozen';

-- Before another model call of a running run: extends its hold to what the run has
-- spent so far (p_usage, as yuxi.run_finish takes it, priced like yuxi.run_record_usage)
-- plus one more call. Returns the hold (NULL: no budget applies); raises
-- insufficient_credits when the balance cannot cover it, changing nothing.
CREATE FUNCTION yuxi.credit_refreeze(p_run_id uuid, p_token uuid, p_usage jsonb DEFAULT '[]')
RETURNS numeric
LANGUAGE plpgsql AS $$
DECLARE
    v_run yuxi.agent_runs;
    v_hold yuxi.credit_holds;
    v_need numeric;
    v_balance numeric;
BEGIN
    v_run := yuxi.run_lock_leased(p_run_id, p_token, clock_timestamp());
    SELECT * INTO v_hold FROM yuxi.credit_holds WHERE run_id = p_run_id AND status = 'held' FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT coalesce(sum(p.cost), 0) INTO v_need FROM yuxi.usage_priced(v_run.uid, p_usage) p;
    v_need := v_need + coalesce(
        (SELECT yuxi.credit_estimate(m) FROM yuxi.model_for_user(v_run.uid, v_run.input_payload ->> 'model_spec') m), 0);
    IF v_need <= v_hold.amount THEN
        RETURN v_hold.amount;
    END IF;
    SELECT balance INTO v_balance FROM yuxi.credit_accounts WHERE uid = v_hold.uid FOR UPDATE;
    IF v_balance < v_need - v_hold.amount THEN
        RAISE EXCEPTION 'insufficient credits: the run holds %, its next model call needs % in all, the balance is %',
            v_hold.amount, v_need, v_balance
            USING ERRCODE = 'YB001', HINT = 'insufficient_credits';
    END IF;
    INSERT INTO yuxi.credit_ledger (uid, kind, delta, run_id, reason)
    VALUES (v_hold.uid, 'freeze', v_hold.amount - v_need, p_run_id, 'frozen for another model call');
    UPDATE yuxi.credit_holds SET amount = v_need WHERE run_id = p_run_id;
    RETURN v_need;
END;
$$;
COMMENT ON FUNCTION yuxi.credit_refreeze(uuid, uuid, jsonb) IS
    'Worker: before another model call, extends the run''s hold to its cost so far plus one call. Raises lease_lost (YL001), insufficient_credits (YB001)';

-- Settles a held hold once: releases the freeze and charges the run's recorded cost,
-- at most what the balance then holds (the rest is recorded as unpaid).
CREATE FUNCTION yuxi.credit_settle(p_run_id uuid, p_status text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_hold yuxi.credit_holds;
    v_cost numeric;
    v_balance numeric;
    v_charge numeric := 0;
BEGIN
    SELECT * INTO v_hold FROM yuxi.credit_holds WHERE run_id = p_run_id AND status = 'held' FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT coalesce(sum(u.cost), 0) INTO v_cost FROM yuxi.run_usage u WHERE u.run_id = p_run_id;
    INSERT INTO yuxi.credit_ledger (uid, kind, delta, run_id, reason)
    VALUES (v_hold.uid, 'release', v_hold.amount, p_run_id, 'the run ended ' || p_status)
    RETURNING balance_after INTO v_balance;
    IF v_cost > 0 THEN
        v_charge := least(v_cost, v_balance);
        IF v_charge > 0 THEN
            INSERT INTO yuxi.credit_ledger (uid, kind, delta, run_id, reason)
            VALUES (v_hold.uid, 'charge', -v_charge, p_run_id, 'the run''s recorded cost');
        END IF;
    END IF;
    UPDATE yuxi.credit_holds
    SET status = CASE WHEN v_cost > 0 THEN 'settled' ELSE 'released' END,
        charged = v_charge, unpaid = v_cost - v_charge, settled_at = clock_timestamp()
    WHERE run_id = p_run_id;
END;
$$;
COMMENT ON FUNCTION yuxi.credit_settle(uuid, text) IS
    'Internal: settles the held hold of a run that ended p_status once (release the freeze, charge the recorded cost); nothing for a run without one';

-- Whoever ends a run (yuxi.run_finish, yuxi.run_reconcile_expired, yuxi.run_request_cancel,
-- an operator in psql) settles its hold, in the same transaction.
CREATE FUNCTION yuxi.agent_runs_settle_credits() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM yuxi.credit_settle(NEW.run_id, NEW.status);
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION yuxi.agent_runs_settle_credits() IS
    'Trigger: a run that ends (completed, interrupted, failed, cancelled) settles its credit hold';
CREATE TRIGGER agent_runs_settle_credits
    AFTER UPDATE OF status ON yuxi.agent_runs
    FOR EACH ROW
    WHEN (NEW.status IS DISTINCT FROM OLD.status
          AND NEW.status IN ('completed', 'interrupted', 'failed', 'cancelled'))
    EXECUTE FUNCTION yuxi.agent_runs_settle_credits();

-- A hold removed with its run (a conversation purged) gives its freeze back first.
CREATE FUNCTION yuxi.credit_holds_release() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status = 'held' THEN
        INSERT INTO yuxi.credit_ledger (uid, kind, delta, run_id, reason)
        SELECT OLD.uid, 'release', OLD.amount, OLD.run_id, 'the run was removed'
        WHERE EXISTS (SELECT 1 FROM yuxi.credit_accounts WHERE uid = OLD.uid);
    END IF;
    RETURN OLD;
END;
$$;
COMMENT ON FUNCTION yuxi.credit_holds_release() IS
    'Trigger: a held hold removed with its run releases its freeze';
CREATE TRIGGER credit_holds_release
    BEFORE DELETE ON yuxi.credit_holds
    FOR EACH ROW EXECUTE FUNCTION yuxi.credit_holds_release();

-- Ends a run as its lease holder. p_messages ([{role, content, metadata?}, ...]) are
-- stored as the run's output; `completed` needs at least one assistant message.
-- p_notify: as for run_append_events. p_events ([{event, payload}, ...]): the run's last
-- events, appended before its `end` in the same transaction (one round trip fewer).
CREATE OR REPLACE FUNCTION yuxi.run_finish(
    p_run_id uuid, p_token uuid, p_status text, p_messages jsonb DEFAULT '[]',
    p_error_type text DEFAULT NULL, p_error_message text DEFAULT NULL, p_now timestamptz DEFAULT NULL,
    p_notify boolean DEFAULT true, p_events jsonb DEFAULT '[]', p_usage jsonb DEFAULT '[]'
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
    -- before the status changes: ending, the run settles its credits on this cost
    PERFORM yuxi.run_record_usage(v_run, p_usage);

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
COMMENT ON FUNCTION yuxi.run_finish(uuid, uuid, text, jsonb, text, text, timestamptz, boolean, jsonb, jsonb) IS
    'Worker: ends a run completed, failed, cancelled or interrupted with its output messages, last events and token usage, and moves the thread''s queue on. Raises invalid_input (YV001), lease_lost (YL001), illegal_transition (YT001)';

-- Messages are history: their text, role, thread and request never change; a message
-- is linked to a run at most once.
CREATE OR REPLACE FUNCTION yuxi.messages_guard() RETURNS trigger
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

DROP FUNCTION yuxi.run_claim_execution(uuid, text, double precision, timestamptz);
DROP FUNCTION yuxi.run_execution_input(uuid);

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
    visible_subagents  text[],
    attachments        jsonb,
    model              jsonb,
    model_key_sealed   bytea,
    input_attachments  jsonb
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
           ARRAY(SELECT s FROM yuxi.subagents_visible_to(r.uid) s),
           yuxi.thread_attachments_json(r.thread_id),
           to_jsonb(mo) - 'api_key_sealed' - 'api_key_hint', mo.api_key_sealed,
           m.metadata -> 'attachments'
    FROM yuxi.agent_runs r
    LEFT JOIN yuxi.conversations c ON c.thread_id = r.thread_id
    LEFT JOIN yuxi.agents a ON a.slug = r.agent_slug AND a.deleted_at IS NULL
    LEFT JOIN yuxi.projects p ON p.id = c.project_id
    LEFT JOIN yuxi.messages m ON m.id = r.input_message_id
    LEFT JOIN LATERAL yuxi.model_for_user(r.uid, r.input_payload->>'model_spec') mo ON true
    WHERE r.run_id = p_run_id
$$;
COMMENT ON FUNCTION yuxi.run_execution_input(uuid) IS
    'Worker: everything needed to execute a run, in one read; identity_error says why the run may not execute (NULL when it may); attachments are the thread''s files under uploads/; model is the registry row of the run''s model_spec (without its key; NULL when it has none) and model_key_sealed its sealed key; input_attachments the ids of the attachments its input message refers to';


-- The executor's claim: yuxi.run_claim and yuxi.run_execution_input in one call. Its
-- commit does not wait for the WAL flush (synchronous_commit off for this transaction):
-- nothing a run does leaves its worker before the manifest's commit, which is
-- synchronous and whose flush makes this claim durable too. A crash of the database
-- before that loses the claim with everything after it: the run is pending again and
-- its next delivery claims it as if for the first time.
CREATE FUNCTION yuxi.run_claim_execution(
    p_run_id uuid, p_worker text, p_lease_seconds double precision, p_now timestamptz DEFAULT NULL
) RETURNS TABLE (
    run_id               uuid,
    thread_id            uuid,
    uid                  uuid,
    agent_slug           text,
    request_id           text,
    run_type             text,
    created_by_run_id    uuid,
    input_message_id     bigint,
    input_payload        jsonb,
    lease_token          uuid,
    lease_expires_at     timestamptz,
    attempt_no           integer,
    started_at           timestamptz,
    manifest_fingerprint text,
    backend_id           text,
    agent_config         jsonb,
    agent_updated_at     timestamptz,
    project_id           uuid,
    workdir_path         text,
    input_text           text,
    identity_error       text,
    visible_subagents    text[],
    attachments          jsonb,
    model                jsonb,
    model_key_sealed     bytea,
    input_attachments    jsonb,
    credit_hold          numeric,
    credit_error         text
)
LANGUAGE plpgsql AS $$
DECLARE
    v_claim yuxi.claimed_run;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    v_claim := yuxi.run_claim(p_run_id, p_worker, p_lease_seconds, p_now);
    RETURN QUERY
    SELECT v_claim.run_id, v_claim.thread_id, v_claim.uid, v_claim.agent_slug, v_claim.request_id,
           v_claim.run_type, v_claim.created_by_run_id, v_claim.input_message_id,
           v_claim.input_payload, v_claim.lease_token, v_claim.lease_expires_at,
           v_claim.attempt_no, v_claim.started_at, v_claim.manifest_fingerprint,
           i.backend_id, i.agent_config, i.agent_updated_at, i.project_id, i.workdir_path,
           i.input_text, i.identity_error, i.visible_subagents, i.attachments, i.model,
           i.model_key_sealed, i.input_attachments, f.hold, f.error
    FROM yuxi.run_execution_input(p_run_id) i
    CROSS JOIN LATERAL yuxi.credit_freeze(p_run_id, v_claim.uid, i.model) f;
END;
$$;
COMMENT ON FUNCTION yuxi.run_claim_execution(uuid, text, double precision, timestamptz) IS
    'Worker: yuxi.run_claim and yuxi.run_execution_input in one call, with the run''s credit freeze (yuxi.credit_freeze: credit_hold, or credit_error when the balance cannot cover it), committed without waiting for the WAL flush (the manifest''s synchronous commit makes it durable). Raises as yuxi.run_claim';
