"""The SQL functions that took over what Python read and wrote on tables outside the
wrapper layer (0023_wrapper_layer.sql): ``yuxi.user_by_name``,
``yuxi.kb_embedding_models``, ``yuxi.mcp_server_sealed_secrets`` and
``yuxi.mcp_server_reseal``, through their wrappers."""

from __future__ import annotations

import uuid

import pytest

from tests.integration.conftest import World
from yuxi.queue.errors import InvalidInput, NotFound
from yuxi.queue.knowledge import kb_create, kb_embedding_models
from yuxi.queue.mcp import Sealed, mcp_server_create, mcp_server_reseal, mcp_server_sealed_secrets
from yuxi.queue.users import user_by_name, user_delete


async def test_user_by_name_finds_a_live_user_only(world: World) -> None:
    async with world.pool.connection() as conn:
        assert await user_by_name(conn, "alice") == world.alice
        await user_delete(conn, world.bob)
        with pytest.raises(NotFound, match=r"^user bob not found$"):
            await user_by_name(conn, "bob")
        with pytest.raises(NotFound, match=r"^user nobody not found$"):
            await user_by_name(conn, "nobody")


async def test_kb_embedding_models_names_each_model_once(world: World) -> None:
    async with world.pool.connection() as conn:
        one = await kb_create(conn, world.alice, name="One", embedding_model="openai:m1")
        two = await kb_create(conn, world.bob, name="Two", embedding_model="openai:m1")
        zero = await kb_create(conn, world.alice, name="Zero", embedding_model="openai:m0")
        text = await kb_create(conn, world.alice, name="Text only")
        ids = [one.id, two.id, zero.id, text.id]
        assert await kb_embedding_models(conn, ids) == ["openai:m0", "openai:m1"]
        assert await kb_embedding_models(conn, [text.id, uuid.uuid4()]) == []
        assert await kb_embedding_models(conn, []) == []


async def test_a_reseal_replaces_the_sealed_secret_it_was_given_only(world: World) -> None:
    http, stdio = uuid.uuid4(), uuid.uuid4()
    async with world.pool.connection() as conn:
        await mcp_server_create(
            conn,
            http,
            world.alice,
            {"slug": "web", "name": "Web", "transport": "streamable_http", "url": "http://h/mcp"},
            headers=Sealed(["Authorization"], b"headers-1"),
        )
        await mcp_server_create(
            conn,
            stdio,
            world.admin,
            {"slug": "sh", "name": "sh", "transport": "stdio", "command": "sh"},
            env=Sealed(["TOKEN"], b"env-1"),
        )
        assert await mcp_server_sealed_secrets(conn) == [
            (http, "headers", b"headers-1"),
            (stdio, "env", b"env-1"),
        ]
        # changed meanwhile, or not this kind: left as it is
        assert not await mcp_server_reseal(conn, http, "headers", b"stale", b"headers-2")
        assert not await mcp_server_reseal(conn, http, "env", b"headers-1", b"headers-2")
        assert await mcp_server_reseal(conn, http, "headers", b"headers-1", b"headers-2")
        assert await mcp_server_reseal(conn, stdio, "env", b"env-1", b"env-2")
        assert await mcp_server_sealed_secrets(conn) == [
            (http, "headers", b"headers-2"),
            (stdio, "env", b"env-2"),
        ]
        for kind in ("url", None):
            with pytest.raises(InvalidInput, match="p_kind headers or env"):
                await mcp_server_reseal(conn, http, kind, b"headers-2", b"x")  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="p_kind headers or env"):
            await mcp_server_reseal(conn, http, "headers", b"headers-2", None)  # type: ignore[arg-type]
