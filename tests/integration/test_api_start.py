"""The API starts without the agent stack: neither ``import yuxi.api.app`` nor `yuxi api`
up to its first healthy answer loads LangChain, LangGraph, the model clients, the
worker's libraries or an agent backend (they cost seconds of CPU at every start; the
API needs LangGraph's checkpointer only to read a checkpoint, and loads it then)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

from tests.mcp_servers import free_port
from yuxi.models.secret_box import new_key

# what the worker runs and the API never needs to start
HEAVY_PACKAGES = (
    "langchain",
    "langchain_core",
    "langchain_openai",
    "langchain_text_splitters",
    "langgraph",
    "langsmith",
    "openai",
    "procrastinate",
    "fastmcp",
    "mcp",
    "pypdf",
    "docx",
)
# the agent backends (the entry points' modules) and what every backend is built on
BACKEND_MODULES = (
    "yuxi.agents.base",
    "yuxi.agents.graph",
    "yuxi.agents.models.loader",
    "yuxi.agents.tools.catalog",
    "yuxi.runtime.executor",
    *(point.module for point in entry_points(group="yuxi.agents")),
)

REPORT = """
def heavy():
    import sys
    packages = set(sys.argv[1].split(","))
    modules = set(sys.argv[2].split(","))
    return sorted(m for m in sys.modules if m.split(".")[0] in packages or m in modules)
"""

AFTER_IMPORT = (
    REPORT
    + """
import json
import yuxi.api.app
print("loaded:", json.dumps(heavy()))
"""
)

# `yuxi api` itself (its click command: settings, database wait, server key, seeding, the
# app and its lifespan); once the health check answers 200, the report, then SIGTERM
AFTER_HEALTHY = (
    REPORT
    + """
import json, os, signal, sys, threading, time, urllib.request

def probe():
    url = f"http://127.0.0.1:{os.environ['YUXI_PORT']}/api/system/health"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    print("loaded:", json.dumps(heavy()), flush=True)
                    break
        except OSError:
            time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=probe, daemon=True).start()
from yuxi.cli import main
main(["api"])
"""
)


def _heavy_modules(code: str, env: dict[str, str] | None = None) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", code, ",".join(HEAVY_PACKAGES), ",".join(BACKEND_MODULES)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    reports = [line for line in result.stdout.splitlines() if line.startswith("loaded: ")]
    assert reports, f"no report (the API never answered 200?):\n{result.stderr}"
    return list(json.loads(reports[0].removeprefix("loaded: ")))


def test_importing_the_api_loads_no_agent_stack() -> None:
    assert _heavy_modules(AFTER_IMPORT) == []


def test_a_healthy_yuxi_api_has_loaded_no_agent_stack(db_url: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "YUXI_DATABASE_URL": db_url,
        "YUXI_HOME": str(tmp_path / "home"),
        "YUXI_SECRET_KEY": new_key(),
        "YUXI_PORT": str(free_port()),
    }
    assert _heavy_modules(AFTER_HEALTHY, env) == []


def test_the_report_names_what_is_loaded() -> None:
    # the same report after importing what runs a graph: it must name the stack
    loaded = _heavy_modules(
        REPORT + "import json, yuxi.runtime.executor\nprint('loaded:', json.dumps(heavy()))"
    )
    assert {"langgraph", "langchain_core", "yuxi.runtime.executor"} <= set(loaded)
