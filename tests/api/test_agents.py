"""Agents (list, detail, admin create/update, share scope) and projects."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import Api, error_of
from tests.fixtures.agent_package import install_agent_package, on_sys_path
from yuxi.agents.tools import builtin_tool_names

pytestmark = pytest.mark.asyncio(loop_scope="module")

SUMMARY_KEYS = {"id", "name", "description", "backend_id", "is_subagent"}
DETAIL_KEYS = SUMMARY_KEYS | {"share_scope", "capabilities", "configurable_items", "config"}


def agent_body(slug: str = "", **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "Helper bot",
        "backend_id": "chatbot",
        "description": "helps",
        "config": {"context": {"model": "builtin:scripted"}},
    }
    if slug:
        body["slug"] = slug
    body.update(overrides)
    return body


async def slugs(api: Api, who: str) -> list[str]:
    response = await api.clients[who].get("/api/agents")
    assert response.status_code == 200
    items = response.json()
    for item in items:
        assert set(item) == SUMMARY_KEYS
    return [item["id"] for item in items]


# -- agents ---------------------------------------------------------------------------


async def test_list_shows_the_agents_each_user_may_see(api: Api) -> None:
    assert {"chatbot", "private"} <= set(await slugs(api, "alice"))
    bob = await slugs(api, "bob")
    assert "chatbot" in bob and "private" not in bob
    assert {"chatbot", "private"} <= set(await slugs(api, "admin"))


async def test_detail_has_configurable_items_and_config(api: Api) -> None:
    response = await api.bob.get("/api/agents/chatbot")
    assert response.status_code == 200
    detail = response.json()
    assert set(detail) == DETAIL_KEYS
    assert detail["id"] == "chatbot" and detail["backend_id"] == "chatbot"
    assert detail["config"] == {"context": {"model": "builtin:scripted"}}
    assert detail["share_scope"] == "all"
    items = detail["configurable_items"]
    assert isinstance(items, list) and items
    assert all(isinstance(item, dict) and "key" in item for item in items)
    assert isinstance(detail["capabilities"], list)


async def test_unknown_agent_is_404(api: Api) -> None:
    error_of(await api.alice.get("/api/agents/no-such-agent"), 404, "not_found")


async def test_admin_creates_and_updates_an_agent(api: Api) -> None:
    response = await api.admin.post("/api/agents", json=agent_body("made-by-admin"))
    assert response.status_code == 201, response.text
    created = response.json()
    assert set(created) == DETAIL_KEYS
    assert created["id"] == "made-by-admin" and created["name"] == "Helper bot"
    assert created["config"] == {"context": {"model": "builtin:scripted"}}
    assert created["configurable_items"]
    assert "made-by-admin" in await slugs(api, "bob")

    response = await api.admin.put(
        "/api/agents/made-by-admin",
        json=agent_body(
            name="Renamed", description="new", config={"context": {"system_prompt": "Be brief."}}
        ),
    )
    assert response.status_code == 200, response.text
    updated = response.json()
    assert (updated["name"], updated["description"]) == ("Renamed", "new")
    assert updated["config"] == {"context": {"system_prompt": "Be brief."}}
    detail = (await api.bob.get("/api/agents/made-by-admin")).json()
    assert detail["name"] == "Renamed"


async def test_creating_an_existing_agent_is_409_agent_exists(api: Api) -> None:
    error_of(await api.admin.post("/api/agents", json=agent_body("chatbot")), 409, "agent_exists")
    # unchanged
    assert (await api.alice.get("/api/agents/chatbot")).json()["name"] == "Chatbot"


async def test_non_admins_may_not_manage_agents(api: Api) -> None:
    error_of(await api.alice.post("/api/agents", json=agent_body("by-alice")), 403, "forbidden")
    error_of(await api.bob.put("/api/agents/chatbot", json=agent_body()), 403, "forbidden")
    error_of(await api.alice.get("/api/agents/by-alice"), 404)
    assert (await api.alice.get("/api/agents/chatbot")).json()["name"] == "Chatbot"


async def test_unknown_backend_is_400(api: Api) -> None:
    error_of(await api.admin.post("/api/agents", json=agent_body("odd", backend_id="nope")), 400)
    error_of(await api.admin.put("/api/agents/chatbot", json=agent_body(backend_id="nope")), 400)
    error_of(await api.admin.get("/api/agents/odd"), 404)


async def test_updating_an_unknown_agent_is_404(api: Api) -> None:
    error_of(await api.admin.put("/api/agents/never-made", json=agent_body()), 404, "not_found")


@pytest.mark.parametrize(
    "overrides",
    [
        {"slug": ""},
        {"slug": "Has Spaces"},
        {"slug": "-leading-dash"},
        {"slug": "x" * 64},
        {"name": ""},
        {"name": "   "},
        {"max_run_attempts": 0},
        {"max_run_attempts": 11},
        {"config": {"context": 5}},
        {"config": {"context": []}},
        {"share_scope": "everyone"},
        {"shared_with": ["not-a-uuid"]},
    ],
    ids=str,
)
async def test_invalid_agents_are_400(api: Api, overrides: dict[str, Any]) -> None:
    body = agent_body("valid-slug-never-created") | overrides
    error_of(await api.admin.post("/api/agents", json=body), 400)
    error_of(await api.admin.get("/api/agents/valid-slug-never-created"), 404)


async def test_share_scope_selected_hides_the_agent(api: Api) -> None:
    response = await api.admin.post("/api/agents", json=agent_body("shared-later"))
    assert response.status_code == 201
    # bob starts a conversation while everyone may see it
    bob_thread = await api.thread("bob", "shared-later")

    response = await api.admin.put(
        "/api/agents/shared-later",
        json=agent_body(share_scope="selected", shared_with=[str(api.uids["alice"])]),
    )
    assert response.status_code == 200, response.text
    assert response.json()["share_scope"] == "selected"

    assert "shared-later" in await slugs(api, "alice")
    assert "shared-later" in await slugs(api, "admin")
    assert "shared-later" not in await slugs(api, "bob")
    assert (await api.alice.get("/api/agents/shared-later")).status_code == 200
    error_of(await api.bob.get("/api/agents/shared-later"), 404, "not_found")
    error_of(
        await api.bob.post("/api/chat/thread", json={"agent_id": "shared-later"}), 404, "not_found"
    )
    assert (await api.alice.post("/api/chat/thread", json={"agent_id": "shared-later"})).is_success
    # bob's older conversation with it can no longer submit
    error_of(
        await api.bob.post("/api/agent/runs", json={"thread_id": bob_thread, "query": "hi"}),
        404,
        "not_found",
    )

    # the seeded `private` agent is the same: alice only
    error_of(await api.bob.get("/api/agents/private"), 404, "not_found")
    error_of(await api.bob.post("/api/chat/thread", json={"agent_id": "private"}), 404)
    assert (await api.alice.get("/api/agents/private")).json()["share_scope"] == "selected"


@pytest.mark.parametrize(
    ("backend_id", "config", "message"),
    [
        ("chatbot", {"context": {"foo": 1}}, "unknown key 'foo' in config.context (known: "),
        ("chatbot", {"context": {"uid": "x"}}, "key 'uid' in config.context is not configurable"),
        (
            "chatbot",
            {"context": {"tool_approval_mode": "sometimes"}},
            "config.context.tool_approval_mode",
        ),
        ("subagent", {"context": {"subagents": []}}, "unknown key 'subagents' in config.context"),
        ("chatbot", {"context": {}, "tools": []}, "unknown key 'tools' in config (known: context)"),
        ("chatbot", {"context": {"tools": "calculator"}}, "config.context.tools must be a list"),
        ("chatbot", {"context": {"summary_threshold": "5"}}, "must be an integer"),
    ],
    ids=str,
)
async def test_what_an_agent_s_context_cannot_hold_is_refused_by_name(
    api: Api, backend_id: str, config: dict[str, Any], message: str
) -> None:
    body = agent_body("refused-config", backend_id=backend_id, config=config)
    created = error_of(await api.admin.post("/api/agents", json=body), 400, "invalid_input")
    assert message in created["message"]
    error_of(await api.admin.get("/api/agents/refused-config"), 404)

    body = agent_body(backend_id=backend_id, config=config)
    updated = error_of(await api.admin.put("/api/agents/chatbot", json=body), 400, "invalid_input")
    assert updated["message"] == created["message"]
    unchanged = (await api.admin.get("/api/agents/chatbot")).json()
    assert unchanged["config"] == {"context": {"model": "builtin:scripted"}}
    assert unchanged["backend_id"] == "chatbot"


async def test_every_visible_configurable_item_may_be_saved(api: Api) -> None:
    detail = (await api.admin.get("/api/agents/chatbot")).json()
    context = {item["key"]: item["default"] for item in detail["configurable_items"]}
    context["model"] = "builtin:scripted"
    body = agent_body("all-defaults", config={"context": context})
    response = await api.admin.post("/api/agents", json=body)
    assert response.status_code == 201, response.text
    assert response.json()["config"] == {"context": context}


async def test_an_agent_s_default_approval_mode_is_stored_and_used(api: Api, worker: None) -> None:
    config = {"context": {"model": "builtin:scripted", "tool_approval_mode": "ask"}}
    response = await api.admin.post("/api/agents", json=agent_body("asks-first", config=config))
    assert response.status_code == 201, response.text
    assert response.json()["config"] == config
    thread = await api.thread("alice", "asks-first")
    asked = await api.submit(thread, '/tool calculator {"expression": "1 + 1"}')
    assert (await api.wait_run(asked["run_id"]))["status"] == "interrupted"
    thread = await api.thread("alice", "asks-first")
    told = await api.submit(
        thread, '/tool calculator {"expression": "1 + 1"}', tool_approval_mode="auto"
    )
    await api.completed(told["run_id"])


async def test_an_installed_agent_package_is_configured_like_a_built_in(
    api: Api, tmp_path: Path
) -> None:
    with on_sys_path(install_agent_package(tmp_path / "site")):
        config = {"context": {"model": "builtin:scripted", "greeting": "Hi", "style": "loud"}}
        body = agent_body("api-greeter", backend_id="example", config=config)
        response = await api.admin.post("/api/agents", json=body)
        assert response.status_code == 201, response.text
        detail = response.json()
        assert (detail["backend_id"], detail["config"]) == ("example", config)
        items = {item["key"]: item for item in detail["configurable_items"]}
        assert items["greeting"]["default"] == "Hello"
        assert items["style"]["options"] == ["plain", "loud"]

        body = agent_body(backend_id="example", config={"context": {"style": "shout"}})
        refused = error_of(await api.admin.put("/api/agents/api-greeter", json=body), 400)
        assert "config.context.style" in refused["message"]
        body = agent_body("api-other", config={"context": {"greeting": "Hi"}})  # a chatbot
        refused = error_of(await api.admin.post("/api/agents", json=body), 400)
        assert "unknown key 'greeting'" in refused["message"]
    # without the package its agents stay listed, with an empty form
    detail = (await api.bob.get("/api/agents/api-greeter")).json()
    assert (detail["configurable_items"], detail["config"]) == ([], config)


@pytest.mark.parametrize("attempts", [2**40, -(2**40)])
async def test_huge_max_run_attempts_is_400_not_500(api: Api, attempts: int) -> None:
    """Once a 500: a value beyond int4 reached SQL as bigint (no such agent_save)."""
    body = agent_body("huge-attempts", max_run_attempts=attempts)
    error_of(await api.admin.post("/api/agents", json=body), 400)
    error_of(
        await api.admin.put("/api/agents/chatbot", json=agent_body(max_run_attempts=attempts)), 400
    )


# -- projects -------------------------------------------------------------------------


async def test_projects_are_created_in_the_callers_workspace(api: Api) -> None:
    response = await api.alice.post("/api/projects", json={"name": "First"})
    assert response.status_code == 201, response.text
    first = response.json()
    assert set(first) == {"id", "name", "workdir_path", "created_at"}
    assert first["name"] == "First"
    # clients see the directory relative to their workspace, never the host's path
    workspace = api.home.resolve() / "workspaces" / str(api.uids["alice"])
    assert first["workdir_path"].startswith("projects/")
    # the column keeps the directory under the workspace; no directory is made on the
    # API's host (its threads' files are the workdir tree at that root, in the store)
    stored = await api.value("SELECT workdir_path FROM yuxi.projects WHERE id = %s", first["id"])
    assert stored == str(workspace / first["workdir_path"])
    assert not await asyncio.to_thread((workspace / first["workdir_path"]).exists)

    response = await api.alice.post("/api/projects", json={"name": "Second", "workdir_path": "a/b"})
    assert response.status_code == 201, response.text
    second = response.json()
    assert second["workdir_path"] == "projects/a/b"
    stored = await api.value("SELECT workdir_path FROM yuxi.projects WHERE id = %s", second["id"])
    assert stored == str(workspace / "projects" / "a" / "b")
    assert not await asyncio.to_thread((workspace / "projects" / "a").exists)
    in_second = await api.thread(project_id=second["id"])
    tree = await api.value(
        "SELECT yuxi.thread_file_tree(%s, %s)", api.uids["alice"], uuid.UUID(in_second)
    )
    root = await api.value("SELECT root FROM yuxi.file_trees WHERE id = %s", tree)
    assert root == "projects/a/b"

    mine = (await api.alice.get("/api/projects")).json()
    ids = [p["id"] for p in mine]
    assert ids.index(first["id"]) < ids.index(second["id"])
    bobs = (await api.bob.get("/api/projects")).json()
    assert not {first["id"], second["id"]} & {p["id"] for p in bobs}


@pytest.mark.parametrize(
    "workdir_path",
    ["../escape", "../../etc", "/etc", "/tmp/elsewhere", ".", "a/../../b", "a/../.."],
)
async def test_a_workdir_outside_the_workspace_is_400(api: Api, workdir_path: str) -> None:
    before = len((await api.alice.get("/api/projects")).json())
    response = await api.alice.post(
        "/api/projects", json={"name": "escape", "workdir_path": workdir_path}
    )
    error_of(response, 400)
    assert len((await api.alice.get("/api/projects")).json()) == before


@pytest.mark.parametrize(
    "body", [{}, {"name": ""}, {"name": "   "}, {"name": 5}, {"name": "x" * 201}]
)
async def test_invalid_projects_are_400(api: Api, body: dict[str, Any]) -> None:
    error_of(await api.alice.post("/api/projects", json=body), 400)


async def test_threads_in_projects(api: Api) -> None:
    project = (await api.alice.post("/api/projects", json={"name": "for threads"})).json()
    response = await api.alice.post(
        "/api/chat/thread", json={"agent_id": "chatbot", "project_id": project["id"]}
    )
    assert response.status_code == 201
    assert response.json()["project_id"] == project["id"]
    # another user's project, or an unknown one, is not found
    error_of(
        await api.bob.post(
            "/api/chat/thread", json={"agent_id": "chatbot", "project_id": project["id"]}
        ),
        404,
        "not_found",
    )
    error_of(
        await api.alice.post(
            "/api/chat/thread",
            json={"agent_id": "chatbot", "project_id": "00000000-0000-0000-0000-000000000000"},
        ),
        404,
        "not_found",
    )


async def test_the_form_offers_what_the_caller_may_select(api: Api) -> None:
    """``options`` of the resource fields: the built-in tools, the subagents the caller can
    see (none but those), and empty catalogs for knowledge bases, MCP servers and skills."""
    for slug, shared in (("helper-visible", "all"), ("helper-admins", "admins")):
        body = agent_body(slug) | {"backend_id": "subagent", "is_subagent": True}
        response = await api.admin.post("/api/agents", json=body | {"share_scope": shared})
        assert response.status_code == 201, response.text
    for client, expected in (
        (api.alice, ["helper-visible"]),
        (api.admin, ["helper-admins", "helper-visible"]),
    ):
        detail = (await client.get("/api/agents/chatbot")).json()
        items = {item["key"]: item for item in detail["configurable_items"]}
        assert items["tools"]["options"] == builtin_tool_names()
        assert items["subagents"]["options"] == expected
        for key in ("knowledges", "mcps", "skills"):
            assert items[key]["options"] == [], key
