"""``GET /info``: what this server is and which LangGraph features it has (open)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from litestar import get

try:
    VERSION = version("yuxi")
except PackageNotFoundError:  # a checkout without the package installed
    VERSION = "0.0.0"


@get("/info", summary="Server information and feature flags (no token needed)", tags=["langgraph"])
async def info() -> dict[str, Any]:
    return {
        "version": f"yuxi-{VERSION}",
        "flags": {"assistants": True, "crons": True, "langsmith": False},
        "metadata": {"server": "yuxi", "docs": "docs/langgraph.md"},
    }
