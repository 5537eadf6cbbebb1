-- yuxi.thread_history_runs, yuxi.thread_history_messages: each chunk read by its own
-- index range scan, in order, instead of every entry numbered, sorted by chunk and
-- (PostgreSQL 15) sorted again inside string_agg.

-- The entries of a thread's runs (by creation time, then id) and of its messages (by
-- id), in chunks of 256 comma-separated entries (the last one fewer), in chunk order. The API streams
-- them between the thread and the closing brackets, so the response leaves while
-- PostgreSQL is still producing it; chunks, not one value per list, because sending one
-- multi-megabyte value costs PostgreSQL about twice the CPU. Nothing for a thread the
-- user cannot see (the API calls yuxi.thread_get first, in the same snapshot).
-- A chunk starts at every 256th key (numbered from the index alone) and is read by an
-- index range scan of its own, in order: no entry is sorted, neither all of them by
-- chunk nor each chunk again (PostgreSQL 15 sorts for an aggregate's ORDER BY even on
-- sorted input), and the first chunk leaves before the last one is read. string_agg
-- keeps its input's order: a subquery with ORDER BY and LIMIT is never flattened, and
-- one plain aggregate reads it as it comes. The chunk starts are sorted by chunk (a
-- few rows) so that ORDER BY chunk, here and in the caller, sorts no entry.
CREATE OR REPLACE FUNCTION yuxi.thread_history_runs(p_uid uuid, p_thread_id uuid)
RETURNS TABLE (chunk bigint, entries text)
LANGUAGE sql STABLE AS $$
    SELECT f.chunk,
           (SELECT string_agg(r.history_entry, ',')
            FROM (SELECT history_entry
                  FROM yuxi.agent_runs
                  WHERE thread_id = p_thread_id AND (created_at, run_id) >= (f.created_at, f.run_id)
                  ORDER BY created_at, run_id
                  LIMIT 256) r)
    FROM (SELECT n / 256 AS chunk, created_at, run_id
          FROM (SELECT created_at, run_id, row_number() OVER (ORDER BY created_at, run_id) - 1 AS n
                FROM yuxi.agent_runs
                WHERE thread_id = p_thread_id
                  AND EXISTS (SELECT 1 FROM yuxi.conversations c
                              WHERE c.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active')) k
          WHERE n % 256 = 0
          ORDER BY chunk) f
    ORDER BY f.chunk
$$;
COMMENT ON FUNCTION yuxi.thread_history_runs(uuid, uuid) IS
    'History: the run entries of the user''s thread, in chunks of 256 comma-separated JSON objects';

CREATE OR REPLACE FUNCTION yuxi.thread_history_messages(p_uid uuid, p_thread_id uuid)
RETURNS TABLE (chunk bigint, entries text)
LANGUAGE sql STABLE AS $$
    SELECT f.chunk,
           (SELECT string_agg(m.history_entry, ',')
            FROM (SELECT history_entry
                  FROM yuxi.messages
                  WHERE thread_id = p_thread_id AND id >= f.id
                  ORDER BY id
                  LIMIT 256) m)
    FROM (SELECT n / 256 AS chunk, id
          FROM (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n
                FROM yuxi.messages
                WHERE thread_id = p_thread_id
                  AND EXISTS (SELECT 1 FROM yuxi.conversations c
                              WHERE c.thread_id = p_thread_id AND c.uid = p_uid AND c.status = 'active')) k
          WHERE n % 256 = 0
          ORDER BY chunk) f
    ORDER BY f.chunk
$$;
COMMENT ON FUNCTION yuxi.thread_history_messages(uuid, uuid) IS
    'History: the message entries of the user''s thread, in chunks of 256 comma-separated JSON objects';
