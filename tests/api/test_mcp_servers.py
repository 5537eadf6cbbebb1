"""The MCP server registry over HTTP: users' own HTTP servers, platform servers (admins)
shared like agents, stdio for admins only, headers and env never shown; a server's
tools as a worker discovered them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.conftest import Api, error_of
from tests.mcp_servers import EXPECTED_TOKEN, RunningServer, http_server, stdio_command

pytestmark = pytest.mark.asyncio(loop_scope="module")

ENV_SECRET = "env-secret-51d0e2"


@pytest.fixture(scope="module")
def mcp_http() -> Iterator[RunningServer]:
    with http_server() as server:
        yield server


async def create(api: Api, who: str, **body: Any) -> dict[str, Any]:
    response = await api.clients[who].post("/api/mcp-servers", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_a_user_registers_their_own_http_server_and_its_headers_never_come_out(
    api: Api, mcp_http: RunningServer
) -> None:
    server = await create(
        api,
        "alice",
        slug="notes",
        name="Notes",
        transport="streamable_http",
        url=mcp_http.url,
        headers={"Authorization": EXPECTED_TOKEN},
        call_timeout_seconds=5,
    )
    assert server["header_names"] == ["Authorization"] and server["share_scope"] == "owner"
    assert server["owner_uid"] == str(api.uids["alice"]) and server["call_timeout_seconds"] == 5
    sealed = await api.value("SELECT headers_sealed FROM yuxi.mcp_servers WHERE slug = 'notes'")
    assert EXPECTED_TOKEN.encode() not in bytes(sealed)
    responses = [
        await api.alice.get("/api/mcp-servers"),
        await api.alice.get("/api/mcp-servers/notes"),
        await api.alice.patch("/api/mcp-servers/notes", json={"name": "My notes"}),
    ]
    for response in responses:
        assert response.status_code == 200, response.text
        assert EXPECTED_TOKEN not in response.text and "mcp-secret" not in response.text
    assert responses[2].json()["header_names"] == ["Authorization"]  # kept
    # bob has no such server; an admin does not see a user's own either
    error_of(await api.bob.get("/api/mcp-servers/notes"), 404, "not_found")
    error_of(await api.bob.delete("/api/mcp-servers/notes"), 404, "not_found")
    assert [s["slug"] for s in (await api.bob.get("/api/mcp-servers")).json()] == []
    error_of(
        await api.alice.post(
            "/api/mcp-servers",
            json={"slug": "notes", "name": "x", "transport": "sse", "url": mcp_http.url},
        ),
        409,
        "mcp_server_exists",
    )
    # bob may have his own "notes"
    await create(api, "bob", slug="notes", name="Bob's", transport="sse", url=mcp_http.url)
    cleared = await api.alice.patch("/api/mcp-servers/notes", json={"headers": None})
    assert cleared.json()["header_names"] == []
    assert (
        await api.value(
            "SELECT headers_sealed FROM yuxi.mcp_servers WHERE slug = 'notes' AND owner_uid = %s",
            api.uids["alice"],
        )
        is None
    )
    assert (await api.alice.delete("/api/mcp-servers/notes")).status_code == 204
    error_of(await api.alice.get("/api/mcp-servers/notes"), 404, "not_found")
    assert (await api.bob.get("/api/mcp-servers/notes")).status_code == 200


async def test_stdio_and_shared_servers_are_for_admins(api: Api, mcp_http: RunningServer) -> None:
    command, args = stdio_command()
    stdio = {
        "slug": "local",
        "name": "Local",
        "transport": "stdio",
        "command": command,
        "args": args,
    }
    error_of(await api.alice.post("/api/mcp-servers", json=stdio), 403, "forbidden")
    shared = {"slug": "wiki", "name": "Wiki", "transport": "streamable_http", "url": mcp_http.url}
    error_of(
        await api.alice.post("/api/mcp-servers", json={**shared, "share_scope": "all"}),
        403,
        "forbidden",
    )
    # an admin's stdio server for everyone, with a secret env
    local = await create(api, "admin", **stdio, env={"TOKEN": ENV_SECRET}, share_scope="all")
    assert local["owner_uid"] is None and local["env_names"] == ["TOKEN"]
    seen = await api.alice.get("/api/mcp-servers/local")
    assert seen.status_code == 200 and ENV_SECRET not in seen.text
    error_of(await api.alice.patch("/api/mcp-servers/local", json={"enabled": False}), 403)
    error_of(await api.alice.delete("/api/mcp-servers/local"), 403, "forbidden")
    # shared with bob only
    wiki = await create(
        api, "admin", **shared, share_scope="selected", shared_with=[str(api.uids["bob"])]
    )
    assert wiki["shared_with"] == [str(api.uids["bob"])]
    error_of(await api.alice.get("/api/mcp-servers/wiki"), 404, "not_found")
    assert (await api.bob.get("/api/mcp-servers/wiki")).status_code == 200
    # a user's own server of the same slug shadows the platform one, for them only
    mine = await create(api, "bob", slug="local", name="Mine", transport="sse", url=mcp_http.url)
    assert (await api.bob.get("/api/mcp-servers/local")).json()["id"] == mine["id"]
    assert (await api.alice.get("/api/mcp-servers/local")).json()["id"] == local["id"]
    # a user's server cannot become a platform one, nor the other way round
    error_of(await api.bob.patch("/api/mcp-servers/local", json={"share_scope": "all"}), 400)
    error_of(await api.admin.patch("/api/mcp-servers/wiki", json={"share_scope": "owner"}), 400)
    moved = await api.admin.patch("/api/mcp-servers/wiki", json={"share_scope": "admins"})
    assert moved.status_code == 200 and moved.json()["shared_with"] == []
    error_of(await api.bob.get("/api/mcp-servers/wiki"), 404, "not_found")


SSE = {"slug": "ok", "name": "x", "transport": "sse", "url": "http://127.0.0.1:1/sse"}


@pytest.mark.parametrize(
    "body",
    [
        {**SSE, "slug": "a_b"},  # "__" would be ambiguous in a tool name
        {**SSE, "url": None},
        {**SSE, "url": "file:///etc/passwd"},
        {**SSE, "transport": "carrier-pigeon"},
        {**SSE, "command": "sh"},
        {**SSE, "token": "t"},
        {**SSE, "headers": {"a b": "1"}},
        {**SSE, "env": {"A": "1"}},  # env is for stdio servers
        {**SSE, "call_timeout_seconds": 0},
        {**SSE, "shared_with": ["00000000-0000-0000-0000-000000000000"]},
    ],
)
async def test_bad_servers_are_refused_clearly(api: Api, body: dict[str, Any]) -> None:
    response = await api.alice.post("/api/mcp-servers", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] in {"invalid_input", "invalid_request"}


async def test_a_servers_tools_are_discovered_by_a_worker(
    api: Api, worker: None, mcp_http: RunningServer
) -> None:
    await create(
        api,
        "alice",
        slug="tooled",
        name="Tooled",
        transport="streamable_http",
        url=mcp_http.url,
        headers={"Authorization": EXPECTED_TOKEN},
    )
    response = await api.alice.get("/api/mcp-servers/tooled/tools")
    assert response.status_code == 200, response.text
    listed = response.json()
    assert listed["pending"] is False and listed["error"] is None
    names = [t["tool"] for t in listed["tools"]]
    assert {"tooled__echo", "tooled__add", "tooled__hang"} <= set(names)
    echo = next(t for t in listed["tools"] if t["name"] == "echo")
    assert (
        echo["description"] == "Repeats the text." and "text" in echo["input_schema"]["properties"]
    )
    assert EXPECTED_TOKEN not in response.text
    # cached: a second look needs no worker round trip
    again = (await api.alice.get("/api/mcp-servers/tooled/tools")).json()
    assert again["fetched_at"] == listed["fetched_at"]
    error_of(await api.bob.get("/api/mcp-servers/tooled/tools"), 404, "not_found")


async def test_an_unreachable_server_shows_its_error(api: Api, worker: None) -> None:
    with http_server() as gone:
        url = gone.url
    await create(
        api,
        "alice",
        slug="gone",
        name="Gone",
        transport="streamable_http",
        url=url,
        connect_timeout_seconds=2,
    )
    listed = (await api.alice.get("/api/mcp-servers/gone/tools")).json()
    assert listed["pending"] is False and listed["tools"] == []
    assert listed["error"].startswith("MCP server gone ")
    # a changed server is discovered anew
    await asyncio.sleep(0.01)
    await api.alice.patch("/api/mcp-servers/gone", json={"enabled": False})
    assert (await api.alice.get("/api/mcp-servers/gone/tools")).json()["pending"] is False
