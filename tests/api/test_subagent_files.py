"""A subagent's files live with the parent conversation: what a child run writes lands
in the parent's workdir and nowhere else (real HTTP, real worker)."""

from __future__ import annotations

import json

import pytest

from tests.api.conftest import Api

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_a_subagents_file_lands_in_the_parent_conversations_workdir(
    api: Api, worker: None
) -> None:
    # scribe: a subagent with the default tools (write_file among them)
    response = await api.admin.post(
        "/api/agents",
        json={
            "slug": "scribe",
            "name": "Scribe",
            "backend_id": "subagent",
            "is_subagent": True,
            "config": {"context": {"model": "builtin:scripted"}},
        },
    )
    assert response.status_code == 201, response.text
    write = "/tool write_file " + json.dumps(
        {"path": "outputs/child.md", "content": "from the child"}
    )
    thread = await api.thread()
    run = await api.submit(
        thread, "/tool task " + json.dumps({"subagent": "scribe", "description": write})
    )
    await api.completed(run["run_id"])
    answer = (await api.result(run["run_id"]))["output"]
    assert answer == (
        "tool task returned: tool write_file returned: wrote 14 bytes to outputs/child.md"
    )
    workdir = api.home / "workspaces" / str(api.uids["alice"]) / "threads" / thread
    assert (workdir / "outputs" / "child.md").read_text() == "from the child"
    assert list(api.home.rglob("child.md")) == [workdir / "outputs" / "child.md"]
