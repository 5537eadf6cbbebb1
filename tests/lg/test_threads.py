"""Info, assistants and threads through the official LangGraph SDK."""

from __future__ import annotations

import uuid

import httpx
import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError

from tests.lg.conftest import Api, Clients

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_info_is_open_and_names_the_server(api: Api) -> None:
    async with httpx.AsyncClient(base_url=api.base_url) as anon:
        response = await anon.get("/lg/info")
    assert response.status_code == 200
    assert response.json()["version"].startswith("yuxi-")
    async with httpx.AsyncClient(base_url=api.base_url) as anon:
        assert (await anon.post("/lg/threads/search", json={})).status_code == 401


async def test_without_cors_origins_no_cors_header_is_sent(api: Api) -> None:
    """YUXI_CORS_ORIGINS unset (tests/browser/test_cors.py sets it): a browser on
    another origin gets its preflight answered without any Access-Control-* header."""
    assert api.settings.cors_origins == ()
    origin = {"Origin": "https://chat.example.com"}
    preflight = await api.anon.options(
        "/lg/threads", headers={**origin, "Access-Control-Request-Method": "POST"}
    )
    answer = await api.anon.get("/lg/info", headers=origin)
    assert (preflight.status_code, answer.status_code) == (204, 200)
    for response in (preflight, answer):
        assert not [k for k in response.headers if k.startswith("access-control-")]


async def test_assistants_are_visible_top_level_agents(sdk: Clients) -> None:
    found = await sdk.alice.assistants.search()
    assert {a["assistant_id"] for a in found} == {"chatbot", "private"}
    assert {a["assistant_id"] for a in await sdk.bob.assistants.search()} == {"chatbot"}
    one = await sdk.alice.assistants.get("chatbot")
    assert one["graph_id"] == "chatbot" and one["name"] == "Chatbot"
    with pytest.raises(NotFoundError):
        await sdk.bob.assistants.get("private")
    schemas = await sdk.alice.assistants.get_schemas("chatbot")
    properties = schemas["context_schema"]["properties"]
    assert {"model", "system_prompt", "tools", "tool_approval_mode"} <= set(properties)
    assert properties["tools"]["type"] == "array"


async def test_thread_create_get_if_exists_patch_search_delete(sdk: Clients) -> None:
    thread = await sdk.alice.threads.create(metadata={"topic": "a"})
    thread_id = thread["thread_id"]
    assert thread["status"] == "idle" and thread["metadata"] == {"topic": "a"}
    assert (await sdk.alice.threads.get(thread_id))["thread_id"] == thread_id
    with pytest.raises(ConflictError):
        await sdk.alice.threads.create(thread_id=thread_id)
    again = await sdk.alice.threads.create(thread_id=thread_id, if_exists="do_nothing")
    assert again["thread_id"] == thread_id
    with pytest.raises(ConflictError):  # another user's id is taken, whoever holds it
        await sdk.bob.threads.create(thread_id=thread_id, if_exists="do_nothing")

    patched = await sdk.alice.threads.update(thread_id, metadata={"colour": "blue"})
    assert patched["metadata"] == {"topic": "a", "colour": "blue"}
    bound = await sdk.alice.threads.create(metadata={"graph_id": "chatbot"})
    assert bound["metadata"]["graph_id"] == "chatbot"
    assert bound["metadata"]["assistant_id"] == "chatbot"
    found = await sdk.alice.threads.search(metadata={"topic": "a"})
    assert [t["thread_id"] for t in found] == [thread_id]
    by_graph = await sdk.alice.threads.search(metadata={"graph_id": "chatbot"})
    assert bound["thread_id"] in {t["thread_id"] for t in by_graph}

    own = str(uuid.uuid4())
    made = await sdk.alice.threads.create(thread_id=own)
    assert made["thread_id"] == own
    await sdk.alice.threads.delete(own)
    with pytest.raises(NotFoundError):
        await sdk.alice.threads.get(own)
    state = await sdk.alice.threads.get_state(thread_id)
    assert state["values"] == {} and state["next"] == []
    assert await sdk.alice.threads.get_history(thread_id) == []


LG_ROUTES = {
    ("get", "/lg/info"),
    ("post", "/lg/assistants/search"),
    ("get", "/lg/assistants/{assistant_id}"),
    ("get", "/lg/assistants/{assistant_id}/schemas"),
    ("post", "/lg/assistants"),
    ("post", "/lg/assistants/count"),
    ("patch", "/lg/assistants/{assistant_id}"),
    ("delete", "/lg/assistants/{assistant_id}"),
    ("post", "/lg/assistants/{assistant_id}/versions"),
    ("post", "/lg/assistants/{assistant_id}/latest"),
    ("get", "/lg/assistants/{assistant_id}/graph"),
    ("get", "/lg/assistants/{assistant_id}/subgraphs"),
    ("get", "/lg/assistants/{assistant_id}/subgraphs/{namespace}"),
    ("put", "/lg/store/items"),
    ("get", "/lg/store/items"),
    ("delete", "/lg/store/items"),
    ("post", "/lg/store/items/search"),
    ("post", "/lg/store/namespaces"),
    ("post", "/lg/threads"),
    ("post", "/lg/threads/search"),
    ("get", "/lg/threads/{thread_id}"),
    ("patch", "/lg/threads/{thread_id}"),
    ("delete", "/lg/threads/{thread_id}"),
    ("get", "/lg/threads/{thread_id}/state"),
    ("post", "/lg/threads/{thread_id}/state"),
    ("post", "/lg/threads/{thread_id}/state/checkpoint"),
    ("get", "/lg/threads/{thread_id}/state/{checkpoint_id}"),
    ("post", "/lg/threads/{thread_id}/copy"),
    ("post", "/lg/threads/count"),
    ("post", "/lg/threads/prune"),
    ("get", "/lg/threads/{thread_id}/stream"),
    ("get", "/lg/threads/{thread_id}/history"),
    ("post", "/lg/threads/{thread_id}/history"),
    ("post", "/lg/threads/{thread_id}/runs"),
    ("get", "/lg/threads/{thread_id}/runs"),
    ("post", "/lg/threads/{thread_id}/runs/stream"),
    ("post", "/lg/threads/{thread_id}/runs/wait"),
    ("get", "/lg/threads/{thread_id}/runs/{run_id}"),
    ("delete", "/lg/threads/{thread_id}/runs/{run_id}"),
    ("get", "/lg/threads/{thread_id}/runs/{run_id}/join"),
    ("get", "/lg/threads/{thread_id}/runs/{run_id}/stream"),
    ("post", "/lg/threads/{thread_id}/runs/{run_id}/cancel"),
    ("post", "/lg/threads/{thread_id}/runs/crons"),
    ("post", "/lg/runs"),
    ("post", "/lg/runs/stream"),
    ("post", "/lg/runs/wait"),
    ("post", "/lg/runs/cancel"),
    ("post", "/lg/runs/crons"),
    ("post", "/lg/runs/crons/search"),
    ("delete", "/lg/runs/crons/{cron_id}"),
    ("patch", "/lg/runs/crons/{cron_id}"),
    ("post", "/lg/runs/crons/count"),
}


async def test_every_route_is_in_the_openapi_schema(api: Api) -> None:
    schema = (await api.anon.get("/schema/openapi.json")).json()
    found = {
        (method, path)
        for path, item in schema["paths"].items()
        if path.startswith("/lg/")
        for method in item
        if method in ("get", "post", "patch", "delete", "put")
    }
    assert found == LG_ROUTES
    assert "apiKey" in schema["components"]["securitySchemes"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/lg/threads/search", {"metadata": [1]}),
        ("/lg/threads/search", {"ids": 3}),
        ("/lg/threads/search", {"limit": -1}),
        ("/lg/assistants/search", {"metadata": "x"}),
        ("/lg/threads", {"thread_id": "not-a-uuid"}),
        ("/lg/threads", {"if_exists": "sometimes"}),
        ("/lg/runs/crons", {"assistant_id": "chatbot"}),
        ("/lg/threads/prune", {"thread_ids": "x"}),
        ("/lg/threads/prune", {"thread_ids": ["not-a-uuid"]}),
        ("/lg/threads/prune", {"thread_ids": [], "strategy": "sometimes"}),
        ("/lg/threads/count", {"status": "asleep"}),
        ("/lg/runs/cancel", {}),
        ("/lg/runs/cancel", {"status": "finished"}),
        ("/lg/runs/cancel", {"status": ["all"]}),
        ("/lg/runs/cancel", {"thread_id": "x", "run_ids": ["y"]}),
    ],
)
async def test_bad_bodies_are_4xx(api: Api, path: str, body: dict[str, object]) -> None:
    headers = {"x-api-key": api.tokens["alice"]}
    response = await api.anon.post(path, json=body, headers=headers)
    assert 400 <= response.status_code < 500, response.text
