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
