"""The /lg routes under another prefix (YUXI_LG_PREFIX)."""

from __future__ import annotations

import pytest
from langgraph_sdk import get_client

from tests.lg.conftest import Api
from yuxi.settings import Settings, SettingsError

pytestmark = pytest.mark.asyncio(loop_scope="module")

API_SETTINGS = {"lg_prefix": "/langgraph"}


async def test_the_routes_move_with_the_prefix(api: Api) -> None:
    assert (await api.anon.get("/langgraph/info")).status_code == 200
    assert (await api.anon.get("/lg/info")).status_code == 404
    client = get_client(url=f"{api.base_url}/langgraph", api_key=api.tokens["alice"])
    try:
        thread = await client.threads.create()
        assert (await client.threads.get(thread["thread_id"]))["status"] == "idle"
    finally:
        await client.aclose()


@pytest.mark.parametrize("prefix", ["", "/", "lg", "/lg/"])
async def test_a_bad_prefix_is_refused(prefix: str) -> None:
    with pytest.raises(SettingsError, match="YUXI_LG_PREFIX"):
        Settings(lg_prefix=prefix).validated()
