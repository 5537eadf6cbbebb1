"""The ``search_knowledge`` tool: searches the knowledge bases this run may read.

It is mounted on an agent whose prepared Context has a non-empty
``_visible_knowledge_bases`` (the agent's ``knowledges`` narrowed to what the user may
read). Each call names one of them or searches all; the worker's ``KnowledgeAccess``
(``services().knowledge``) checks again, where the call executes, that the user may
still read each target (a share revoked since preparation is refused), then runs the
hybrid search. Results come back numbered ``[[ref:n]]`` so the model can cite them.
"""

from __future__ import annotations

from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import tool

from yuxi.agents.context import BaseContext
from yuxi.agents.services import services

TOOL_NAME = "search_knowledge"
MAX_K = 20


def visible_knowledge_bases(context: object) -> list[dict[str, Any]]:
    """The knowledge bases this run may search: ``[{id, name, slug}]`` (prepared)."""
    resolved = getattr(context, "resolved", None)
    return list(resolved.knowledge_bases) if resolved is not None else []


def _pick(visible: list[dict[str, Any]], wanted: str) -> dict[str, Any] | None:
    for match in ("id", "slug", "name"):
        for kb in visible:
            if str(kb.get(match, "")).casefold() == wanted.strip().casefold():
                return kb
    return None


def _names(visible: list[dict[str, Any]]) -> str:
    return ", ".join(f"{kb.get('name')} ({kb.get('id')})" for kb in visible) or "none"


@tool(parse_docstring=True)
async def search_knowledge(
    runtime: ToolRuntime[BaseContext],
    query: str,
    knowledge_base: str | None = None,
    k: int = 5,
) -> str:
    """Search the knowledge bases available to you; returns the best matching passages.

    Args:
        query: What to look for, in the words the documents would use.
        knowledge_base: Search only this knowledge base (its name or id); all when left out.
        k: How many passages to return (1-20).
    """
    visible = visible_knowledge_bases(runtime.context)
    if knowledge_base:
        target = _pick(visible, knowledge_base)
        if target is None:
            return (
                f"knowledge base {knowledge_base} is not available (available: {_names(visible)})"
            )
        targets = [target]
    else:
        targets = visible
    if not targets:
        return "no knowledge base is available to this agent"
    access = services().knowledge
    if access is None:
        return "knowledge bases cannot be searched outside a yuxi worker"
    result = await access.search(
        str(runtime.context.uid),
        [str(kb["id"]) for kb in targets],
        query,
        max(1, min(int(k or 5), MAX_K)),
    )
    names = {str(kb["id"]): str(kb.get("name") or kb["id"]) for kb in visible}
    lines = []
    if result.refused:
        refused = ", ".join(names.get(kb, kb) for kb in result.refused)
        if len(result.refused) == len(targets):
            return f"refused: you may no longer read knowledge base {refused}"
        lines.append(f"(not searched: you may no longer read {refused})")
    if not result.hits:
        lines.append(f"no passage matches {query!r}")
    for n, hit in enumerate(result.hits, 1):
        source = names.get(hit.knowledge_base, hit.knowledge_base)
        lines.append(f"[[ref:{n}]] {hit.filename} ({source}, chunk {hit.chunk})\n{hit.text}")
    return "\n\n".join(lines)
