-- yuxi: the model registry. Platform models (owner_uid NULL) are managed by admins;
-- a user's own models (BYOK: bring your own key) are theirs alone. A run's model spec
-- resolves to the user's own enabled model of that spec, else the enabled platform one.
--
-- API keys are stored sealed (AES-256-GCM under the server key, bound to the model's
-- id: yuxi/models/secret_box.py). PostgreSQL never sees a key in the clear, so no
-- statement log, pg_stat_statements entry or dump holds one; only the worker that
-- builds the provider opens it.

-- A model as clients see it: everything but the sealed key (has_key says whether one
-- is set, api_key_hint its last characters).
CREATE TYPE yuxi.model_info AS (
    id                     uuid,
    owner_uid              uuid,
    spec                   text,
    name                   text,
    base_url               text,
    has_key                boolean,
    api_key_hint           text,
    streaming              boolean,
    function_calling       boolean,
    vision                 boolean,
    json_mode              boolean,
    context_window         integer,
    max_tokens             integer,
    temperature            double precision,
    top_p                  double precision,
    price_input_per_mtok   numeric,
    price_output_per_mtok  numeric,
    price_cached_per_mtok  numeric,
    enabled                boolean,
    created_at             timestamptz,
    updated_at             timestamptz
);
COMMENT ON TYPE yuxi.model_info IS 'A registered model as the API shows it: never its key, only has_key and api_key_hint';

CREATE FUNCTION yuxi.model_info_of(m yuxi.models) RETURNS yuxi.model_info
LANGUAGE sql IMMUTABLE AS $$
    SELECT (m.id, m.owner_uid, m.spec, m.name, m.base_url, m.api_key_sealed IS NOT NULL,
            m.api_key_hint, m.streaming, m.function_calling, m.vision, m.json_mode,
            m.context_window, m.max_tokens, m.temperature, m.top_p, m.price_input_per_mtok,
            m.price_output_per_mtok, m.price_cached_per_mtok, m.enabled, m.created_at,
            m.updated_at)::yuxi.model_info
$$;
COMMENT ON FUNCTION yuxi.model_info_of(yuxi.models) IS 'Internal: a models row without its sealed key';

-- Fields a client may set, with their types; anything else in p_fields is refused.
CREATE FUNCTION yuxi.model_check_fields(p_fields jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_key text;
BEGIN
    IF jsonb_typeof(p_fields) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'model fields must be a JSON object' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    FOR v_key IN SELECT jsonb_object_keys(p_fields) LOOP
        IF v_key NOT IN ('spec', 'name', 'base_url', 'streaming', 'function_calling', 'vision',
                         'json_mode', 'context_window', 'max_tokens', 'temperature', 'top_p',
                         'price_input_per_mtok', 'price_output_per_mtok', 'price_cached_per_mtok',
                         'enabled') THEN
            RAISE EXCEPTION 'unknown model field %', v_key USING ERRCODE = 'YV001', HINT = 'invalid_input';
        END IF;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION yuxi.model_check_fields(jsonb) IS
    'Internal: raises invalid_input (YV001) for a model field a client may not set';

-- Registers a model: a platform one (p_owner NULL; the API lets only admins) or a
-- user's own. p_id is chosen by the caller, who seals the key bound to it.
CREATE FUNCTION yuxi.model_create(
    p_id uuid, p_owner uuid, p_fields jsonb, p_key_sealed bytea DEFAULT NULL,
    p_key_hint text DEFAULT NULL
) RETURNS yuxi.model_info
LANGUAGE plpgsql AS $$
DECLARE
    v_row yuxi.models;
BEGIN
    PERFORM yuxi.model_check_fields(p_fields);
    IF p_fields->>'spec' IS NULL OR p_fields->>'name' IS NULL THEN
        RAISE EXCEPTION 'a model needs spec and name' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    INSERT INTO yuxi.models (id, owner_uid, spec, name, base_url, api_key_sealed, api_key_hint,
                             streaming, function_calling, vision, json_mode, context_window,
                             max_tokens, temperature, top_p, price_input_per_mtok,
                             price_output_per_mtok, price_cached_per_mtok, enabled)
    VALUES (p_id, p_owner, p_fields->>'spec', p_fields->>'name', p_fields->>'base_url',
            p_key_sealed, p_key_hint,
            coalesce((p_fields->>'streaming')::boolean, true),
            coalesce((p_fields->>'function_calling')::boolean, true),
            coalesce((p_fields->>'vision')::boolean, false),
            coalesce((p_fields->>'json_mode')::boolean, false),
            (p_fields->>'context_window')::integer, (p_fields->>'max_tokens')::integer,
            (p_fields->>'temperature')::double precision, (p_fields->>'top_p')::double precision,
            (p_fields->>'price_input_per_mtok')::numeric, (p_fields->>'price_output_per_mtok')::numeric,
            (p_fields->>'price_cached_per_mtok')::numeric,
            coalesce((p_fields->>'enabled')::boolean, true))
    ON CONFLICT DO NOTHING
    RETURNING * INTO v_row;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'model % is already registered%', p_fields->>'spec',
            CASE WHEN p_owner IS NULL THEN '' ELSE ' for this user' END
            USING ERRCODE = 'YQ012', HINT = 'model_exists';
    END IF;
    RETURN yuxi.model_info_of(v_row);
END;
$$;
COMMENT ON FUNCTION yuxi.model_create(uuid, uuid, jsonb, bytea, text) IS
    'Registers a platform model (p_owner NULL) or a user''s own; p_fields as the API body (spec, name, base_url, flags, parameters, prices, enabled). Raises invalid_input (YV001), model_exists (YQ012)';

-- Changes the fields present in p_fields (a JSON null clears an optional one) and,
-- with p_set_key, the key (NULL removes it). p_owner NULL addresses a platform model.
CREATE FUNCTION yuxi.model_update(
    p_id uuid, p_owner uuid, p_fields jsonb, p_set_key boolean DEFAULT false,
    p_key_sealed bytea DEFAULT NULL, p_key_hint text DEFAULT NULL
) RETURNS yuxi.model_info
LANGUAGE plpgsql AS $$
DECLARE
    v_row yuxi.models;
    f jsonb := p_fields;
BEGIN
    PERFORM yuxi.model_check_fields(f);
    IF (f ? 'spec' AND f->>'spec' IS NULL) OR (f ? 'name' AND f->>'name' IS NULL) THEN
        RAISE EXCEPTION 'spec and name cannot be cleared' USING ERRCODE = 'YV001', HINT = 'invalid_input';
    END IF;
    UPDATE yuxi.models m SET
        spec = CASE WHEN f ? 'spec' THEN f->>'spec' ELSE m.spec END,
        name = CASE WHEN f ? 'name' THEN f->>'name' ELSE m.name END,
        base_url = CASE WHEN f ? 'base_url' THEN f->>'base_url' ELSE m.base_url END,
        streaming = CASE WHEN f ? 'streaming' THEN coalesce((f->>'streaming')::boolean, true) ELSE m.streaming END,
        function_calling = CASE WHEN f ? 'function_calling' THEN coalesce((f->>'function_calling')::boolean, true) ELSE m.function_calling END,
        vision = CASE WHEN f ? 'vision' THEN coalesce((f->>'vision')::boolean, false) ELSE m.vision END,
        json_mode = CASE WHEN f ? 'json_mode' THEN coalesce((f->>'json_mode')::boolean, false) ELSE m.json_mode END,
        context_window = CASE WHEN f ? 'context_window' THEN (f->>'context_window')::integer ELSE m.context_window END,
        max_tokens = CASE WHEN f ? 'max_tokens' THEN (f->>'max_tokens')::integer ELSE m.max_tokens END,
        temperature = CASE WHEN f ? 'temperature' THEN (f->>'temperature')::double precision ELSE m.temperature END,
        top_p = CASE WHEN f ? 'top_p' THEN (f->>'top_p')::double precision ELSE m.top_p END,
        price_input_per_mtok = CASE WHEN f ? 'price_input_per_mtok' THEN (f->>'price_input_per_mtok')::numeric ELSE m.price_input_per_mtok END,
        price_output_per_mtok = CASE WHEN f ? 'price_output_per_mtok' THEN (f->>'price_output_per_mtok')::numeric ELSE m.price_output_per_mtok END,
        price_cached_per_mtok = CASE WHEN f ? 'price_cached_per_mtok' THEN (f->>'price_cached_per_mtok')::numeric ELSE m.price_cached_per_mtok END,
        enabled = CASE WHEN f ? 'enabled' THEN coalesce((f->>'enabled')::boolean, true) ELSE m.enabled END,
        api_key_sealed = CASE WHEN p_set_key THEN p_key_sealed ELSE m.api_key_sealed END,
        api_key_hint = CASE WHEN p_set_key THEN p_key_hint ELSE m.api_key_hint END,
        updated_at = now()
    WHERE m.id = p_id AND m.owner_uid IS NOT DISTINCT FROM p_owner
    RETURNING * INTO v_row;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'model % not found', p_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN yuxi.model_info_of(v_row);
EXCEPTION
    WHEN unique_violation THEN
        RAISE EXCEPTION 'model % is already registered', f->>'spec' USING ERRCODE = 'YQ012', HINT = 'model_exists';
END;
$$;
COMMENT ON FUNCTION yuxi.model_update(uuid, uuid, jsonb, boolean, bytea, text) IS
    'Changes the fields present in p_fields of a platform model (p_owner NULL) or a user''s own, and the key with p_set_key. Raises invalid_input (YV001), not_found (YN001), model_exists (YQ012)';

CREATE FUNCTION yuxi.model_delete(p_id uuid, p_owner uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM yuxi.models WHERE id = p_id AND owner_uid IS NOT DISTINCT FROM p_owner;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'model % not found', p_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
END;
$$;
COMMENT ON FUNCTION yuxi.model_delete(uuid, uuid) IS
    'Removes a platform model (p_owner NULL) or a user''s own. Raises not_found (YN001)';

-- One model of the registry as its owner (or, for a platform model, anyone) sees it.
CREATE FUNCTION yuxi.model_get(p_id uuid, p_owner uuid) RETURNS yuxi.model_info
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_row yuxi.models;
BEGIN
    SELECT * INTO v_row FROM yuxi.models WHERE id = p_id AND owner_uid IS NOT DISTINCT FROM p_owner;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'model % not found', p_id USING ERRCODE = 'YN001', HINT = 'not_found';
    END IF;
    RETURN yuxi.model_info_of(v_row);
END;
$$;
COMMENT ON FUNCTION yuxi.model_get(uuid, uuid) IS
    'A platform model (p_owner NULL) or one of the user''s own, without its key. Raises not_found (YN001)';

-- Platform models (p_owner NULL) or a user's own, by spec; p_enabled_only for what a
-- user may pick.
CREATE FUNCTION yuxi.model_list(p_owner uuid, p_enabled_only boolean DEFAULT false)
RETURNS SETOF yuxi.model_info
LANGUAGE sql STABLE AS $$
    SELECT (yuxi.model_info_of(m)).* FROM yuxi.models m
    WHERE m.owner_uid IS NOT DISTINCT FROM p_owner AND (m.enabled OR NOT p_enabled_only)
    ORDER BY m.spec
$$;
COMMENT ON FUNCTION yuxi.model_list(uuid, boolean) IS
    'Platform models (p_owner NULL) or a user''s own models, by spec, without keys; p_enabled_only leaves out disabled ones';

-- What `yuxi model rekey` reads: every stored sealed key with its model's id.
CREATE FUNCTION yuxi.model_sealed_keys() RETURNS TABLE (id uuid, api_key_sealed bytea)
LANGUAGE sql STABLE AS $$
    SELECT m.id, m.api_key_sealed FROM yuxi.models m WHERE m.api_key_sealed IS NOT NULL ORDER BY m.id
$$;
COMMENT ON FUNCTION yuxi.model_sealed_keys() IS
    'Every model''s sealed key with the model id, for re-sealing under a new server key (yuxi model rekey)';

-- Replaces a model's sealed key with the same key sealed anew, if it is still p_old
-- (a key changed meanwhile is left as it is); true when replaced.
CREATE FUNCTION yuxi.model_reseal(p_id uuid, p_old bytea, p_new bytea) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE yuxi.models SET api_key_sealed = p_new WHERE id = p_id AND api_key_sealed = p_old;
    RETURN FOUND;
END;
$$;
COMMENT ON FUNCTION yuxi.model_reseal(uuid, bytea, bytea) IS
    'Replaces a model''s sealed key with a re-sealed one if it is still p_old (yuxi model rekey); true when replaced';
