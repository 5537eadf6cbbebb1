"""The /lg API through the official ``langgraph_sdk`` client, against the stack of
tests/api/conftest.py (a real server over HTTP, a real worker)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.api.conftest import Api, api, module_db_url, worker

__all__ = ["Api", "api", "module_db_url", "sdk", "worker"]


class Clients:
    """One SDK client per seeded user."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.url = f"{api.base_url}{api.settings.lg_prefix}"
        self.by_user = {
            name: get_client(url=self.url, api_key=token) for name, token in api.tokens.items()
        }

    @property
    def alice(self) -> LangGraphClient:
        return self.by_user["alice"]

    @property
    def bob(self) -> LangGraphClient:
        return self.by_user["bob"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sdk(api: Api) -> AsyncIterator[Clients]:
    clients = Clients(api)
    try:
        yield clients
    finally:
        for client in clients.by_user.values():
            await client.aclose()
