"""A worker registers before its agent stack has loaded: ``yuxi.worker.app`` imports
none of it (yuxi/worker/stack.py loads it in the background from the worker's start),
and the stack's own list names what a run needs."""

from __future__ import annotations

import json
import subprocess
import sys

from yuxi.worker.stack import STACK_MODULES

STACK_PACKAGES = ("langchain", "langchain_core", "langchain_openai", "langgraph", "openai")

PROBE = """
import json, sys
for module in sys.argv[1].split(","):
    __import__(module)
packages = set(sys.argv[2].split(","))
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & packages)))
"""


def _loaded_after(*modules: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(modules), ",".join(STACK_PACKAGES)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout))


def test_the_worker_module_imports_no_agent_stack() -> None:
    assert _loaded_after("yuxi.worker.app") == []


def test_the_stack_is_what_a_run_needs() -> None:
    # the executor and the built-in agents' graph bring LangChain, LangGraph and the
    # OpenAI client with them: the worker's module does not, so the probe would see them
    assert _loaded_after(*STACK_MODULES) == sorted(STACK_PACKAGES)
    assert {"yuxi.runtime.executor", "yuxi.agents.graph"} <= set(STACK_MODULES)
