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
