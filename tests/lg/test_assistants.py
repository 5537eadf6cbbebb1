"""Assistants (create, update, versions, count, delete), their graph drawings, and
LangGraph's store, through the official SDK and RemoteGraph against a real server and
worker; the store shared by two users, and written by a graph during a run."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.pregel.remote import RemoteGraph
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import (
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    UnprocessableEntityError,
)

from tests.api.conftest import error_of
from tests.fixtures.store_agent import BACKEND_ID, StoreAgent
from tests.lg.conftest import Api, Clients
from yuxi.agents.registry import register_backend, unregister_backend

pytestmark = pytest.mark.asyncio(loop_scope="module")
SCRIPTED = {"model": "builtin:scripted"}


@pytest.fixture(scope="module", autouse=True)
def store_backend() -> Iterator[None]:
    """The store probe's backend, in this process: the API's and the worker's."""
    register_backend(StoreAgent)
    try:
        yield
    finally:
        unregister_backend(BACKEND_ID)


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def test_create_update_versions_latest_count_delete(sdk: Clients, api: Api) -> None:
    admin = sdk.by_user["admin"]
    made = await admin.assistants.create(
        "chatbot",
        assistant_id="helper-a",
        name="Helper",
        context={**SCRIPTED, "system_prompt": "be brief"},
        metadata={"team": "x"},
    )
    assert (made["assistant_id"], made["graph_id"], made["version"]) == ("helper-a", "chatbot", 1)
    assert made["metadata"] == {"team": "x", "backend_id": "chatbot"}
    assert made["context"] == {**SCRIPTED, "system_prompt": "be brief"}
    with pytest.raises(ConflictError):
        await admin.assistants.create("chatbot", assistant_id="helper-a")
    again = await admin.assistants.create(
        "chatbot", assistant_id="helper-a", name="Other", if_exists="do_nothing"
    )
    assert (again["name"], again["version"]) == ("Helper", 1)
    # the graph's own assistant, to anyone who can see it; nothing is created
    builtin = await sdk.alice.assistants.create(graph_id="chatbot", if_exists="do_nothing")
    assert builtin["assistant_id"] == "chatbot"
    # it is a yuxi agent: the native API shows it, to everyone (shared with all)
    native = await api.bob.get("/api/agents/helper-a")
    assert native.json()["config"]["context"]["system_prompt"] == "be brief"

    two = await admin.assistants.update(
        "helper-a", context={**SCRIPTED, "system_prompt": "be long"}, metadata={"stage": "beta"}
    )
    assert two["version"] == 2 and two["metadata"]["team"] == "x"
    assert two["metadata"]["stage"] == "beta" and two["context"]["system_prompt"] == "be long"
    three = await admin.assistants.update("helper-a", name="Helper 3")
    assert (three["version"], three["name"]) == (3, "Helper 3")
    assert three["context"]["system_prompt"] == "be long"
    # a change through the native API is a version too
    patched = await api.admin.patch(
        "/api/agents/helper-a", json={"config": {"context": {**SCRIPTED, "system_prompt": "four"}}}
    )
    assert patched.status_code == 200, patched.text
    versions = await sdk.bob.assistants.get_versions("helper-a")
    assert [v["version"] for v in versions] == [4, 3, 2, 1]
    assert versions[-1]["context"]["system_prompt"] == "be brief"
    assert versions[-1]["name"] == "Helper" and versions[-1]["metadata"]["team"] == "x"
    assert [v["version"] for v in await sdk.bob.assistants.get_versions("helper-a", limit=1)] == [4]
    assert [
        v["version"] for v in await sdk.bob.assistants.get_versions("helper-a", {"stage": "beta"})
    ] == [4, 3, 2]

    latest = await admin.assistants.set_latest("helper-a", 1)
    assert (latest["version"], latest["name"]) == (1, "Helper")
    assert latest["context"]["system_prompt"] == "be brief" and "stage" not in latest["metadata"]
    assert (await sdk.alice.assistants.get("helper-a"))["version"] == 1
    assert len(await admin.assistants.get_versions("helper-a")) == 4  # none added
    five = await admin.assistants.update("helper-a", description="now five")
    assert (five["version"], five["description"], five["name"]) == (5, "now five", "Helper")
    with pytest.raises(NotFoundError):
        await admin.assistants.set_latest("helper-a", 99)

    assert await sdk.alice.assistants.count(metadata={"team": "x"}) == 1
    assert await sdk.bob.assistants.count() == 2  # chatbot and helper-a, not private
    assert await admin.assistants.count(graph_id="chatbot") == 3
    found = await sdk.alice.assistants.search(graph_id="chatbot", metadata={"team": "x"})
    assert [a["assistant_id"] for a in found] == ["helper-a"]

    await admin.assistants.delete("helper-a")
    with pytest.raises(NotFoundError):
        await sdk.alice.assistants.get("helper-a")
    with pytest.raises(ConflictError):  # a deleted agent's id stays taken
        await admin.assistants.create("chatbot", assistant_id="helper-a")
    assert (await api.bob.get("/api/agents/helper-a")).status_code == 404


async def test_only_admins_change_assistants_and_others_see_404(sdk: Clients, api: Api) -> None:
    admin = sdk.by_user["admin"]
    await admin.assistants.create("chatbot", assistant_id="shared-b", context=SCRIPTED)
    with pytest.raises(PermissionDeniedError):
        await sdk.alice.assistants.create("chatbot", assistant_id="mine")
    with pytest.raises(PermissionDeniedError):
        await sdk.alice.assistants.update("shared-b", name="taken over")
    with pytest.raises(PermissionDeniedError):
        await sdk.alice.assistants.delete("shared-b")
    with pytest.raises(PermissionDeniedError):
        await sdk.alice.assistants.set_latest("shared-b", 1)
    # someone else's assistant the caller cannot see: 404, whatever they ask
    with pytest.raises(NotFoundError):
        await sdk.bob.assistants.update("private", name="x")
    with pytest.raises(NotFoundError):
        await sdk.bob.assistants.delete("private")
    with pytest.raises(NotFoundError):
        await sdk.bob.assistants.get_versions("private")
    with pytest.raises(NotFoundError):
        await sdk.bob.assistants.get_graph("private")
    headers = {"x-api-key": api.tokens["alice"]}
    denied = await api.anon.post(
        "/lg/assistants", json={"graph_id": "chatbot", "assistant_id": "mine"}, headers=headers
    )
    assert "admins" in error_of(denied, 403, "forbidden")["message"]
    assert (await api.alice.get("/api/agents/mine")).status_code == 404

    admin_headers = {"x-api-key": api.tokens["admin"]}
    for body, status in (
        ({"graph_id": "no-such-backend"}, 404),
        ({"graph_id": "chatbot", "context": {"nonsense": 1}}, 400),
        ({"graph_id": "chatbot", "assistant_id": "Not A Slug!"}, 400),
        ({"graph_id": "chatbot", "if_exists": "sometimes"}, 400),
        ({"graph_id": "chatbot", "config": {"recursion_limit": 5}}, 422),
        ({}, 400),
    ):
        response = await api.anon.post("/lg/assistants", json=body, headers=admin_headers)
        error_of(response, status)
    bad = await api.anon.patch(
        "/lg/assistants/shared-b", json={"context": {"tools": "calculator"}}, headers=admin_headers
    )
    error_of(bad, 400)
    with pytest.raises(UnprocessableEntityError):
        await admin.assistants.delete("shared-b", delete_threads=True)
    assert (await sdk.alice.assistants.get("shared-b"))["version"] == 1


async def test_concurrent_creates_of_one_id_make_one_agent(sdk: Clients, api: Api) -> None:
    admin = sdk.by_user["admin"]
    made = await asyncio.gather(
        *(
            admin.assistants.create(
                "chatbot", assistant_id="raced", name=f"n{i}", if_exists="do_nothing"
            )
            for i in range(8)
        )
    )
    assert {m["assistant_id"] for m in made} == {"raced"}
    assert len({m["name"] for m in made}) == 1  # every answer is the one that was created
    assert await api.value("SELECT count(*) FROM yuxi.agents WHERE slug = 'raced'") == 1
    versions = "SELECT count(*) FROM yuxi.agent_versions WHERE agent_slug = 'raced'"
    assert await api.value(versions) == 1


async def test_graph_and_subgraphs_as_langgraph_draws_them(sdk: Clients, api: Api) -> None:
    admin = sdk.by_user["admin"]
    await admin.assistants.create(BACKEND_ID, assistant_id="drawn", context=SCRIPTED)
    flat = await sdk.alice.assistants.get_graph("drawn")
    ids = {node["id"] for node in flat["nodes"]}
    assert {"__start__", "remember", "reply", "__end__"} <= ids
    assert {"source": "remember", "target": "reply"} in [
        {"source": e["source"], "target": e["target"]} for e in flat["edges"]
    ]
    deep = await sdk.alice.assistants.get_graph("drawn", xray=True)
    assert "reply:answer" in {node["id"] for node in deep["nodes"]}
    subgraphs = await sdk.alice.assistants.get_subgraphs("drawn")
    assert set(subgraphs) == {"reply"}
    assert "note" in subgraphs["reply"]["input_schema"]["properties"]
    assert set(await sdk.alice.assistants.get_subgraphs("drawn", namespace="reply")) == {"reply"}
    assert await sdk.alice.assistants.get_subgraphs("drawn", namespace="nowhere") == {}

    # the built-in graph too: langchain's agent with its model and tools
    chatbot = await sdk.alice.assistants.get_graph("chatbot")
    assert {"model", "tools"} <= {node["id"] for node in chatbot["nodes"]}

    sync = get_sync_client(url=sdk.url, api_key=api.tokens["alice"])
    try:
        remote = RemoteGraph("drawn", client=sdk.alice, sync_client=sync)
        drawing = await asyncio.to_thread(remote.get_graph)  # the sync client, off the loop
        assert {"remember", "reply"} <= set(drawing.nodes)
        assert (await remote.aget_graph(xray=1)).nodes.keys() >= {"reply:answer"}
    finally:
        sync.close()

    headers = {"x-api-key": api.tokens["alice"]}
    error_of(await api.anon.get("/lg/assistants/drawn/graph?xray=sideways", headers=headers), 400)


async def test_the_store_is_per_user(sdk: Clients, api: Api) -> None:
    alice, bob = sdk.alice.store, sdk.bob.store
    await alice.put_item(["prefs", "ui"], "theme", {"dark": True})
    await alice.put_item(["prefs", "ui"], "font", {"size": 12})
    await alice.put_item(["prefs"], "lang", {"code": "en"})
    got = await alice.get_item(["prefs", "ui"], "theme")
    assert (got["namespace"], got["key"]) == (["prefs", "ui"], "theme")
    assert got["value"] == {"dark": True}
    with pytest.raises(NotFoundError):
        await bob.get_item(["prefs", "ui"], "theme")
    await bob.put_item(["prefs", "ui"], "theme", {"dark": False})
    assert (await alice.get_item(["prefs", "ui"], "theme"))["value"] == {"dark": True}
    assert (await bob.get_item(["prefs", "ui"], "theme"))["value"] == {"dark": False}

    found = await alice.search_items(["prefs"])
    assert sorted(i["key"] for i in found["items"]) == ["font", "lang", "theme"]
    assert {tuple(i["namespace"]) for i in found["items"]} == {("prefs",), ("prefs", "ui")}
    filtered = await alice.search_items(["prefs", "ui"], filter={"size": 12})
    assert [i["key"] for i in filtered["items"]] == ["font"]
    assert [i["key"] for i in (await bob.search_items(["prefs"]))["items"]] == ["theme"]
    spaces = await alice.list_namespaces(prefix=["prefs"])
    assert sorted(spaces["namespaces"]) == [["prefs"], ["prefs", "ui"]]
    assert (await alice.list_namespaces(prefix=["prefs"], max_depth=1))["namespaces"] == [["prefs"]]
    assert (await bob.list_namespaces(prefix=["prefs"]))["namespaces"] == [["prefs", "ui"]]

    # the real namespace is the user's, and never shown
    prefixes = {
        row[0] for row in await api.sql("SELECT prefix FROM public.store WHERE key = 'theme'")
    }
    assert prefixes == {
        f"users.{api.uids['alice']}.prefs.ui",
        f"users.{api.uids['bob']}.prefs.ui",
    }

    await alice.delete_item(["prefs", "ui"], "theme")
    with pytest.raises(NotFoundError):
        await alice.get_item(["prefs", "ui"], "theme")
    assert (await bob.get_item(["prefs", "ui"], "theme"))["value"] == {"dark": False}

    headers = {"x-api-key": api.tokens["alice"]}
    for body, status in (
        ({"namespace": ["a.b"], "key": "k", "value": {}}, 400),
        ({"namespace": [], "key": "k", "value": {}}, 400),
        ({"namespace": ["a"], "key": "k", "value": [1]}, 400),
        ({"namespace": ["a"], "key": "k", "value": {}, "ttl": 5}, 422),
    ):
        error_of(await api.anon.put("/lg/store/items", json=body, headers=headers), status)
    query = {"namespace_prefix": ["prefs"], "query": "dark"}
    error_of(await api.anon.post("/lg/store/items/search", json=query, headers=headers), 422)
    error_of(await api.anon.get("/lg/store/items", params={"key": "k"}, headers=headers), 400)


async def test_a_graph_reads_and_writes_the_users_store(
    sdk: Clients, api: Api, worker: None
) -> None:
    await sdk.by_user["admin"].assistants.create(
        BACKEND_ID, assistant_id="memo", context=SCRIPTED, if_exists="do_nothing"
    )

    async def run(who: str, text: str) -> str:
        client = sdk.by_user[who]
        thread = await client.threads.create()
        values = await client.runs.wait(thread["thread_id"], "memo", input=said(text))
        assert isinstance(values, dict), values
        return str(values["messages"][-1]["content"])

    assert await run("alice", "blue") == "remembered blue; before: nothing"
    item = await sdk.alice.store.get_item(["memories"], "last")
    assert item["value"] == {"text": "blue"}
    assert await run("bob", "red") == "remembered red; before: nothing"
    assert (await sdk.alice.store.get_item(["memories"], "last"))["value"] == {"text": "blue"}
    # what the route writes is what the graph reads, in the user's own namespace
    await sdk.alice.store.put_item(["memories"], "last", {"text": "from the route"})
    assert await run("alice", "green") == "remembered green; before: from the route"
    assert (await sdk.bob.store.get_item(["memories"], "last"))["value"] == {"text": "red"}
