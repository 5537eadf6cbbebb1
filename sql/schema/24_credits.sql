-- yuxi: budgets. A user may have a credit balance (yuxi.credit_accounts; a user without
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
