"""The console in a real Chromium (Playwright, the Debian package's browser) against the
API served over HTTP with a real worker (tests/api/conftest.py's ``api`` and ``worker``).

One browser per module; each test opens its own context (its own sessionStorage).
Without /usr/bin/chromium the browser tests skip, naming the install command; the HTTP
checks of the console still run. Screenshots go to the test output directory
(``YUXI_SCREENSHOTS``, else pytest's base temp dir); with ``YUXI_UPDATE_DOCS_SCREENSHOTS=1``
the ones docs/console.md shows are written to docs/console/ too.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.api.conftest import Api, api, module_db_url, worker

__all__ = ["api", "module_db_url", "worker"]

CHROMIUM = Path(os.environ.get("YUXI_CHROMIUM", "/usr/bin/chromium"))
INSTALL = "apt-get install -y chromium chromium-driver fonts-noto-cjk"
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "console"


def chromium_missing() -> bool:
    return not CHROMIUM.exists()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Any]:
    if chromium_missing():
        pytest.skip(f"no Chromium at {CHROMIUM}: install it with `{INSTALL}`")
    try:
        from playwright.async_api import async_playwright
    except ImportError:  # pragma: no cover - a dev dependency
        pytest.skip("playwright is not installed (uv sync)")
    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get("YUXI_SCREENSHOTS")
    path = Path(configured) if configured else tmp_path_factory.getbasetemp() / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


class Shots:
    """Saves screenshots to the output directory (and to docs/ when asked)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.update_docs = os.environ.get("YUXI_UPDATE_DOCS_SCREENSHOTS") == "1"

    async def take(self, page: Any, name: str, *, docs: bool = False) -> Path:
        path = self.directory / f"{name}.png"
        await page.screenshot(path=str(path))
        if docs and self.update_docs:
            DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, DOCS_SCREENSHOTS / f"{name}.png")
        return path


@pytest.fixture(scope="session")
def shots(screenshots: Path) -> Shots:
    return Shots(screenshots)


@pytest.fixture
def stack(api: Api, worker: None) -> Api:
    return api
