"""Todos: a run's write_todos (LangChain's TodoListMiddleware) shows in the thread's
state, over real HTTP with a real worker."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_a_runs_todos_show_in_the_thread_state(api: Api, worker: None) -> None:
    thread = await api.thread()
    run = await api.submit(thread, "/todo a; [x] b; [~] c")
    await api.completed(run["run_id"])
    answer = (await api.result(run["run_id"]))["output"]
    assert answer.startswith("tool write_todos returned: Updated todo list to ")
    response = await api.alice.get(f"/api/chat/thread/{thread}/state")
    assert response.status_code == 200, response.text
    assert response.json()["agent_state"]["todos"] == [
        {"content": "a", "status": "pending"},
        {"content": "b", "status": "completed"},
        {"content": "c", "status": "in_progress"},
    ]
    # bob sees nothing of it
    assert (await api.bob.get(f"/api/chat/thread/{thread}/state")).status_code == 404


async def test_writing_todos_needs_no_approval(api: Api, worker: None) -> None:
    """The todo list is the run's own plan: like ask_user, no approval in ``ask`` mode."""
    thread = await api.thread()
    run = await api.submit(thread, "/todo only step", tool_approval_mode="ask")
    await api.completed(run["run_id"])
    state = (await api.alice.get(f"/api/chat/thread/{thread}/state")).json()
    assert state["agent_state"]["todos"] == [{"content": "only step", "status": "pending"}]
    assert state["interrupt"] is None
