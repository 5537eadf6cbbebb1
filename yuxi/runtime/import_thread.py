"""The process's one thread for importing what is slow to import (LangGraph, LangChain,
the model clients) while the event loop goes on serving.

A serving process starts without them and loads them here, in the background: a worker
registers and takes jobs before its agent stack is loaded, an API reads its first
checkpoint without stopping every other request for the half second LangGraph takes.
One thread for every such import in the process (``yuxi up`` has both), so that two
of them never import the same packages at once: that can deadlock on Python's import
locks, or hand one of them a half-initialised module. A process exiting meanwhile
waits for the import under way (a second at most).
"""

from __future__ import annotations

import asyncio
import importlib
from concurrent.futures import ThreadPoolExecutor

_IMPORTER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="yuxi-import")


def _import_all(modules: tuple[str, ...]) -> None:
    for name in modules:
        importlib.import_module(name)


async def import_in_background(*modules: str) -> None:
    """Returns once ``modules`` are imported (at once when they are already), importing
    them in the import thread meanwhile (after what it was given before).

    Call it once the event loop's thread has imported its own modules: the one thread
    keeps background imports from racing each other, not from racing the loop's."""
    await asyncio.get_running_loop().run_in_executor(_IMPORTER, _import_all, modules)
