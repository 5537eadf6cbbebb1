"""Threads without a worker: runs stay pending, so every state here is deterministic."""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import msgspec
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from tests.api.conftest import Api, error_of, read_sse
from yuxi.api.routes.runs import RunTiming
from yuxi.api.routes.threads import History, HistoryMessage, HistoryRun
from yuxi.queue.threads import thread_get, thread_runs

pytestmark = pytest.mark.asyncio(loop_scope="module")

THREAD_KEYS = {
    "id",
    "agent_id",
    "project_id",
    "title",
    "thread_status",
    "created_at",
    "updated_at",
    "workdir",
}


async def test_create_and_list(api: Api) -> None:
    response = await api.alice.post(
        "/api/chat/thread", json={"agent_id": "chatbot", "title": "Hello"}
    )
    assert response.status_code == 201, response.text
    thread = response.json()
    assert set(thread) == THREAD_KEYS
    assert thread["agent_id"] == "chatbot" and thread["title"] == "Hello"
    assert thread["project_id"] is None and thread["thread_status"] == "done"
    uuid.UUID(thread["id"])

    untitled = await api.thread()
    listed = (await api.alice.get("/api/chat/threads")).json()
    for item in listed:
        assert set(item) == THREAD_KEYS
    ids = [t["id"] for t in listed]
    assert {thread["id"], untitled} <= set(ids)
    assert next(t for t in listed if t["id"] == untitled)["title"] == ""
    assert not {thread["id"], untitled} & {
        t["id"] for t in (await api.bob.get("/api/chat/threads")).json()
    }


async def test_list_puts_the_most_recently_active_first(api: Api) -> None:
    older = await api.thread()
    newer = await api.thread()
    ids = [t["id"] for t in (await api.alice.get("/api/chat/threads")).json()]
    assert ids.index(newer) < ids.index(older)
    await api.submit(older, "activity")
    ids = [t["id"] for t in (await api.alice.get("/api/chat/threads")).json()]
    assert ids.index(older) < ids.index(newer)


async def test_create_with_an_invisible_or_unknown_agent_is_404(api: Api) -> None:
    for agent in ("private", "no-such-agent"):
        error_of(await api.bob.post("/api/chat/thread", json={"agent_id": agent}), 404, "not_found")
    assert (
        await api.alice.post("/api/chat/thread", json={"agent_id": "private"})
    ).status_code == 201


async def test_delete_hides_the_thread_everywhere(api: Api) -> None:
    thread = await api.thread()
    running = await api.submit(thread, "first")
    queued = await api.submit(thread, "second")
    assert queued["status"] == "queued"

    response = await api.alice.delete(f"/api/chat/thread/{thread}")
    assert response.status_code in (200, 204), response.text

    assert thread not in [t["id"] for t in (await api.alice.get("/api/chat/threads")).json()]
    for method, path, body in (
        ("GET", f"/api/chat/thread/{thread}/history", None),
        ("POST", f"/api/chat/thread/{thread}/viewed", None),
        ("GET", f"/api/chat/thread/{thread}/state", None),
        ("DELETE", f"/api/chat/thread/{thread}", None),
        ("GET", f"/api/agent/thread/{thread}/requests", None),
        ("POST", f"/api/agent/thread/{thread}/requests/continue", None),
        ("POST", "/api/agent/runs", {"thread_id": thread, "query": "after delete"}),
    ):
        error_of(await api.alice.request(method, path, json=body), 404, "not_found")
    # resubmitting a request of the deleted thread is not found either
    error_of(
        await api.alice.post(
            "/api/agent/runs",
            json={"thread_id": thread, "query": "first", "request_id": running["request_id"]},
        ),
        404,
        "not_found",
    )
    # its queue was cancelled and its run stopped
    assert (
        await api.value(
            "SELECT status FROM yuxi.agent_run_requests WHERE request_id = %s",
            queued["request_id"],
        )
        == "cancelled"
    )
    assert (
        await api.value("SELECT status FROM yuxi.agent_runs WHERE run_id = %s", running["run_id"])
        == "cancelled"
    )


async def test_history_shape_and_order(api: Api) -> None:
    thread = await api.thread()
    first = await api.submit(thread, "one")
    second = await api.submit(thread, "two")
    third = await api.submit(thread, "three", queue_policy="reject")
    assert third["status"] == "rejected"

    # cancelling the pending run pauses the backlog; continuing dispatches `two`
    cancel = await api.alice.post(f"/api/agent/runs/{first['run_id']}/cancel")
    assert cancel.status_code == 200 and cancel.json()["status"] == "cancelled"
    cont = await api.alice.post(f"/api/agent/thread/{thread}/requests/continue")
    assert cont.status_code == 200, cont.text
    second_run = cont.json()["run_id"]
    assert second_run == (await api.request(second["request_id"]))["run_id"]

    history = await api.history(thread)
    assert set(history) == {"thread", "runs", "history"}
    assert history["thread"]["id"] == thread and set(history["thread"]) == THREAD_KEYS
    assert history["thread"]["thread_status"] == "loading"

    runs = history["runs"]
    assert [r["run_id"] for r in runs] == [first["run_id"], second_run]
    assert [r["status"] for r in runs] == ["cancelled", "pending"]
    assert [r["request_id"] for r in runs] == [first["request_id"], second["request_id"]]
    for run in runs:
        assert set(run) == {
            "run_id",
            "request_id",
            "run_type",
            "created_by_run_id",
            "status",
            "timing",
        }
        assert set(run["timing"]) == {"created_at", "started_at", "finished_at"}
        assert run["run_type"] == "chat" and run["created_by_run_id"] is None
    assert runs[0]["timing"]["finished_at"] is not None
    assert runs[1]["timing"]["started_at"] is None and runs[1]["timing"]["finished_at"] is None

    messages = history["history"]
    assert [m["id"] for m in messages] == sorted(m["id"] for m in messages)
    assert [(m["role"], m["content"], m["delivery_status"]) for m in messages] == [
        ("user", "one", "cancelled"),
        ("user", "two", "dispatched"),
        ("user", "three", "rejected"),
    ]
    assert [m["run_id"] for m in messages] == [first["run_id"], second_run, None]
    assert [m["request_id"] for m in messages] == [
        first["request_id"],
        second["request_id"],
        third["request_id"],
    ]
    for message in messages:
        assert {"id", "role", "content", "run_id", "request_id", "metadata"} <= set(message)
        assert "timing" not in message


TRICKY = 'quotes " and \\ backslash, \n newline, \t tab, \x01 control, \u2028 separator, 中文, 🦜'


async def test_history_json_is_what_msgspec_would_encode_from_the_rows(api: Api) -> None:
    """PostgreSQL renders history (yuxi.thread_history_json); it must match the DTOs
    encoded by msgspec from the same rows, string for string, escapes and times included."""
    project = await api.alice.post("/api/projects", json={"name": "p"})
    assert project.status_code == 201, project.text
    thread = await api.thread(title=TRICKY, project_id=project.json()["id"])
    first = await api.submit(thread, TRICKY)
    await api.submit(thread, "second")
    await api.alice.post(f"/api/agent/runs/{first['run_id']}/cancel")
    await api.alice.post(f"/api/agent/thread/{thread}/requests/continue")
    # an assistant message written from psql, with nested metadata and a whole-second time
    await api.sql(
        "INSERT INTO yuxi.messages (thread_id, role, content, run_id, metadata, created_at)"
        " VALUES (%s, 'assistant', %s, %s, %s, '2026-01-02 03:04:05+00')",
        thread,
        TRICKY,
        first["run_id"],
        Jsonb({"nested": {"list": [1, 2.5, None, True], "text": TRICKY}, "empty": {}}),
    )

    uid = api.uids["alice"]
    async with api.pool.connection() as conn:
        info = await thread_get(conn, uid, uuid.UUID(thread))
        runs = await thread_runs(conn, uid, uuid.UUID(thread))
        cur = await conn.execute(
            "SELECT id, role, content, run_id, request_id, delivery_status, metadata, created_at"
            " FROM yuxi.thread_messages(%s, %s)",
            (uid, thread),
        )
        messages = await cur.fetchall()
    expected = History(
        thread=info,
        runs=[
            HistoryRun(
                run_id=r.run_id,
                request_id=r.request_id,
                run_type=r.run_type,
                created_by_run_id=r.created_by_run_id,
                status=r.status,
                timing=RunTiming(r.created_at, r.started_at, r.finished_at),
            )
            for r in runs
        ],
        history=[HistoryMessage(*row) for row in messages],
    )
    assert len(expected.runs) == 2 and len(expected.history) == 3

    response = await api.alice.get(f"/api/chat/thread/{thread}/history")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json() == json.loads(msgspec.json.encode(expected))
    assert response.json()["history"][2]["created_at"] == "2026-01-02T03:04:05Z"
    # psql gets the same document, byte for byte
    rendered = await api.value("SELECT yuxi.thread_history_json(%s, %s)", uid, thread)
    assert rendered.encode() == response.content


LONG_THREAD = """
DO $$
DECLARE
    v_run uuid;
BEGIN
    FOR i IN 1..300 LOOP
        v_run := (yuxi.request_submit({u}, {t}, 'question ' || i, {t} || '-' || i)).run_id;
        PERFORM yuxi.run_finish(v_run, (yuxi.run_claim(v_run, 'test', 60)).lease_token,
            'completed',
            jsonb_build_array(jsonb_build_object('role', 'assistant', 'content', 'answer ' || i)),
            NULL, NULL, NULL, false);
    END LOOP;
END;
$$
"""


async def test_history_of_a_long_thread_keeps_every_entry_in_order(api: Api) -> None:
    """History is read in chunks of 256 entries: 300 runs and 600 messages span several."""
    thread = await api.thread()
    async with api.pool.connection() as conn:
        statement = sql.SQL(LONG_THREAD).format(
            u=sql.Literal(api.uids["alice"]), t=sql.Literal(uuid.UUID(thread))
        )
        await conn.execute(statement)
    expected_runs = await api.sql(
        "SELECT run_id::text FROM yuxi.agent_runs WHERE thread_id = %s ORDER BY created_at, run_id",
        thread,
    )
    history = await api.history(thread)
    assert [r["run_id"] for r in history["runs"]] == [row[0] for row in expected_runs]
    assert len(expected_runs) == 300
    contents = [m["content"] for m in history["history"]]
    assert contents == [text for i in range(1, 301) for text in (f"question {i}", f"answer {i}")]
    assert [m["id"] for m in history["history"]] == sorted(m["id"] for m in history["history"])


async def test_history_of_a_thread_filling_its_chunks_exactly(api: Api) -> None:
    """256 runs and 512 messages: the chunks end exactly on the last entry (each chunk
    is read from where it starts, so no empty or short chunk may follow a full one)."""
    thread = await api.thread()
    async with api.pool.connection() as conn:
        statement = sql.SQL(LONG_THREAD.replace("1..300", "1..256")).format(
            u=sql.Literal(api.uids["alice"]), t=sql.Literal(uuid.UUID(thread))
        )
        await conn.execute(statement)
    sizes = "SELECT array_agg(json_array_length(('[' || entries || ']')::json) ORDER BY chunk)"
    uid = api.uids["alice"]
    run_chunks = await api.value(sizes + " FROM yuxi.thread_history_runs(%s, %s)", uid, thread)
    message_chunks = await api.value(
        sizes + " FROM yuxi.thread_history_messages(%s, %s)", uid, thread
    )
    assert run_chunks == [256]
    assert message_chunks == [256, 256]
    chunk_numbers = await api.value(
        "SELECT array_agg(chunk ORDER BY chunk) FROM yuxi.thread_history_messages(%s, %s)",
        uid,
        thread,
    )
    assert chunk_numbers == [0, 1]
    history = await api.history(thread)
    expected_runs = await api.sql(
        "SELECT run_id::text FROM yuxi.agent_runs WHERE thread_id = %s ORDER BY created_at, run_id",
        thread,
    )
    assert [r["run_id"] for r in history["runs"]] == [row[0] for row in expected_runs]
    contents = [m["content"] for m in history["history"]]
    assert contents == [text for i in range(1, 257) for text in (f"question {i}", f"answer {i}")]


async def test_a_history_read_abandoned_midway_gives_its_connection_back(api: Api) -> None:
    """History streams from a pooled connection held in a transaction; clients that hang
    up halfway must not leave it checked out or idle in transaction."""
    thread = await api.thread()
    async with api.pool.connection() as conn:
        await conn.execute(
            sql.SQL(LONG_THREAD.replace("'answer ' || i", "repeat('long answer ', 2000)")).format(
                u=sql.Literal(api.uids["alice"]), t=sql.Literal(uuid.UUID(thread))
            )
        )
    address = httpx.URL(api.base_url)
    request = (
        f"GET /api/chat/thread/{thread}/history HTTP/1.1\r\nHost: {address.host}\r\n"
        f"Authorization: Bearer {api.tokens['alice']}\r\n\r\n"
    ).encode()
    for _ in range(api.settings.pool_max_size + 5):
        reader, writer = await asyncio.open_connection(address.host, address.port)
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        await reader.read(1000)  # a little of the body, then hang up
        writer.transport.abort()

    # every connection came back: more full reads than the pool holds, each in time
    for _ in range(api.settings.pool_max_size + 5):
        history = await asyncio.wait_for(api.history(thread), timeout=10)
        assert len(history["history"]) == 600
    left_in_transaction = await api.value(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND state LIKE 'idle in transaction%%'"
    )
    assert left_in_transaction == 0


async def test_history_does_not_change_viewed_state(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "waiting")
    assert (await api.history(thread))["thread"]["thread_status"] == "loading"
    # a cancelled run has finished: ready until viewed
    await api.alice.post(f"/api/agent/runs/{info['run_id']}/cancel")
    for _ in range(3):
        assert (await api.history(thread))["thread"]["thread_status"] == "ready"
    listed = {t["id"]: t for t in (await api.alice.get("/api/chat/threads")).json()}
    assert listed[thread]["thread_status"] == "ready"

    viewed = await api.alice.post(f"/api/chat/thread/{thread}/viewed")
    assert viewed.status_code == 200, viewed.text
    assert set(viewed.json()) == THREAD_KEYS
    assert viewed.json()["thread_status"] == "done"
    assert (await api.history(thread))["thread"]["thread_status"] == "done"


async def test_a_thread_is_loading_while_its_run_is_pending(api: Api) -> None:
    thread = await api.thread()
    assert (await api.alice.post(f"/api/chat/thread/{thread}/viewed")).json()[
        "thread_status"
    ] == "done"
    await api.submit(thread, "pending")
    assert (await api.history(thread))["thread"]["thread_status"] == "loading"
    viewed = await api.alice.post(f"/api/chat/thread/{thread}/viewed")
    assert viewed.json()["thread_status"] == "loading"


async def test_state_of_a_fresh_thread(api: Api) -> None:
    thread = await api.thread()
    response = await api.alice.get(f"/api/chat/thread/{thread}/state")
    assert response.status_code == 200
    state = response.json()
    assert set(state) == {"agent_state", "interrupt"}
    assert state["interrupt"] is None
    assert state["agent_state"]["message_count"] == 0


async def test_unknown_threads_are_404(api: Api) -> None:
    unknown = str(uuid.uuid4())
    for method, path in (
        ("GET", f"/api/chat/thread/{unknown}/history"),
        ("POST", f"/api/chat/thread/{unknown}/viewed"),
        ("GET", f"/api/chat/thread/{unknown}/state"),
        ("DELETE", f"/api/chat/thread/{unknown}"),
        ("GET", f"/api/agent/thread/{unknown}/requests"),
        ("POST", f"/api/agent/thread/{unknown}/requests/continue"),
    ):
        error_of(await api.alice.request(method, path), 404, "not_found")
    error_of(
        await api.alice.post("/api/agent/runs", json={"thread_id": unknown, "query": "x"}),
        404,
        "not_found",
    )


async def test_a_run_cancelled_before_it_started_streams_one_end(api: Api) -> None:
    thread = await api.thread()
    info = await api.submit(thread, "never runs")
    await api.alice.post(f"/api/agent/runs/{info['run_id']}/cancel")
    events = await read_sse(api.alice, info["run_id"])
    assert [(e.event, e.seq) for e in events] == [("end", 1)]
    assert events[0].json()["status"] == "cancelled"
