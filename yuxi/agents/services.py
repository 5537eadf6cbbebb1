"""What the worker lends the tools and models of the run it executes, as one value.

A graph's tools and model callbacks cannot reach the database, the run's event writer
or its lease: ``agents`` knows nothing of the queue. The worker sets one
``RunServices`` around the graph it streams (``run_services``), as procrastinate hands a
job its ``JobContext``, and what a tool or a model callback needs it asks of
``services()``. Outside a worker (a graph run on its own) every service is None and the
tools say they cannot work there.

The protocols each service meets live here too, so that the modules using them
(``delegation``, ``memory``, ``models.usage``, ``tools.knowledge``) import this one and
never each other.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol


class Delegate(Protocol):
    """Runs the ``task`` tool's child runs."""

    async def run_subagent(self, slug: str, task: str) -> str:
        """Runs subagent ``slug`` on ``task`` as a child run; returns what it answered,
        or a one-line account of why it did not."""
        ...


class TextSink(Protocol):
    """Where a run's model text goes (the run's event writer)."""

    def message_chunk(self, message_id: str | None, text: str) -> None: ...


class UsageSink(Protocol):
    """Where each model call's end goes (the run's usage collector): a LangChain
    callback handler's ``on_llm_end``."""

    def on_llm_end(self, response: Any, **kwargs: Any) -> Any: ...


class ModelCallGate(Protocol):
    """What may refuse an agent's next model call (the run's budget); it raises to
    refuse."""

    async def before_model_call(self) -> None: ...


class RunMemory(Protocol):
    """The worker's side of the memory tools for one run."""

    @property
    def run_id(self) -> str:
        """The run the worker executes."""
        ...

    @property
    def uid(self) -> str:
        """The run's user, whose workspace holds the file."""
        ...

    async def check_lease(self) -> None:
        """Raises ``MemoryRefused`` unless the run (of this user) still holds its lease."""
        ...

    async def read(self) -> str:
        """The file's text as the agent may see it (at most 64 KiB, without HTML comments);
        ``MemoryRefused`` when it is missing, a symlink or unreadable."""
        ...

    async def edit(self, change: Callable[[str], str], key: str | None = None) -> int:
        """Replaces the file's text with ``change(text)`` atomically; the new size in
        bytes. ``MemoryRefused`` (nothing changed) for a missing or unusable file or a
        result over the size limit. ``key``: the tool call's id; an edit under a key the
        run applied already (in an earlier attempt) is not applied again, and returns
        the size it had."""
        ...


class ToolCallLedger(Protocol):
    """The run's record of the tool calls it applied, across its attempts."""

    async def applied(self, call_id: str) -> str | None:
        """The result of ``call_id`` when the run applied it already, else None."""
        ...

    async def record(self, call_id: str, tool: str, result: str) -> None:
        """Records that the run applied ``call_id`` with ``result``."""
        ...


class FileSink(Protocol):
    """Where a run's file writes go: the store, through the worker's cache."""

    async def wrote(self, path: str) -> None:
        """The file at ``path`` (relative to the run's workdir) was written locally; it
        is in the store when this returns."""
        ...


@dataclass(frozen=True)
class KnowledgeHit:
    knowledge_base: str  # its id
    document_id: str
    filename: str
    chunk: int
    text: str
    score: float


@dataclass(frozen=True)
class KnowledgeResult:
    hits: list[KnowledgeHit] = field(default_factory=list)
    # targets the user may no longer read (checked at execution time)
    refused: list[str] = field(default_factory=list)


class KnowledgeAccess(Protocol):
    async def search(self, uid: str, kb_ids: list[str], query: str, k: int) -> KnowledgeResult:
        """The best ``k`` chunks of those of ``kb_ids`` the user ``uid`` may read now."""
        ...


@dataclass(frozen=True)
class RunServices:
    """One run's services; None where the run has none (no budget: no ``call_gate``)."""

    # the task tool's child runs
    delegate: Delegate | None = None
    # every model call's tokens (summarisation included)
    usage: UsageSink | None = None
    # the models' text, streamed into the run's events
    text: TextSink | None = None
    # a run holding credits extends its freeze before each further model call
    call_gate: ModelCallGate | None = None
    # the memory tools check this run's identity and lease on every call
    memory: RunMemory | None = None
    # the search_knowledge tool re-checks the user's access and searches
    knowledge: KnowledgeAccess | None = None
    # the file tools' writes reach the store before they return
    files: FileSink | None = None
    # side-effecting tools apply a call at most once across the run's attempts
    calls: ToolCallLedger | None = None


NO_SERVICES = RunServices()

_current: ContextVar[RunServices] = ContextVar("yuxi_run_services", default=NO_SERVICES)


def services() -> RunServices:
    """The services of the run being executed (``NO_SERVICES`` outside a run)."""
    return _current.get()


@contextlib.contextmanager
def run_services(lent: RunServices) -> Iterator[RunServices]:
    """Lends ``lent`` to the tools and models called inside the block (the current
    task and the tasks it starts)."""
    token = _current.set(lent)
    try:
        yield lent
    finally:
        _current.reset(token)
