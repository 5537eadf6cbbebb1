"""prepare_agent_runtime_context: from stored configuration to the Context one run uses."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from yuxi.agents.base import BaseAgent
from yuxi.agents.context import BaseContext
from yuxi.queue.runs import ExecutionInput
from yuxi.runtime.resources import (
    RESOURCE_KINDS,
    ResourceCatalog,
    narrow,
    narrow_subagents,
    skill_closure,
    visible_knowledge_bases,
)
from yuxi.runtime.workspace import (
    MEMORY_FILE,
    WorkspaceFile,
    read_prompt_files,
    read_workspace_file,
    workspace_prompt,
)


@dataclass
class PreparedContext:
    """The Context plus what preparing it read, for the manifest."""

    context: BaseContext
    prompt_files: list[WorkspaceFile] = field(default_factory=list)
    ignored_config_keys: list[str] = field(default_factory=list)


def user_workspace(home: Path, uid: str) -> Path:
    """The user's workspace: agents/AGENTS.md, USER.md and MEMORY.md live here."""
    return home / "workspaces" / uid


def conversation_workdir(home: Path, run: ExecutionInput) -> Path:
    """The project's workdir, or a per-conversation directory in the user's workspace."""
    if run.workdir_path:
        return Path(run.workdir_path)
    return user_workspace(home, str(run.uid)) / "threads" / str(run.thread_id)


async def prepare_agent_runtime_context(
    agent: BaseAgent, run: ExecutionInput, *, catalog: ResourceCatalog, home: Path
) -> PreparedContext:
    """Merges the agent's configurable fields, the run's model and approval mode, the run's
    identity and workdir, the user's workspace prompts, and the resources the user may use
    (narrowed per the resource rules)."""
    context = agent.context_schema()
    stored = (run.agent_config or {}).get("context") or {}
    ignored = context.update_from_dict(stored if isinstance(stored, dict) else {})

    payload = run.input_payload
    context.model = str(payload.get("model_spec") or context.model)
    # the one place the approval mode is read from the run's input; the rest of the
    # runtime reads the prepared Context
    context.set_tool_approval_mode(payload.get("tool_approval_mode"))
    context.uid = str(run.uid)
    context.thread_id = str(run.thread_id)
    context.run_id = str(run.run_id)
    context.workdir = str(conversation_workdir(home, run))

    for kind in RESOURCE_KINDS:
        accessible = await catalog.accessible(kind, run.uid)
        setattr(context, kind, narrow(getattr(context, kind), accessible))
    if context.skills:
        context.skills = skill_closure(
            context.skills,
            await catalog.skill_dependencies(run.uid),
            await catalog.accessible("skills", run.uid),
        )
    context._visible_knowledge_bases = await visible_knowledge_bases(
        catalog, run.uid, context.knowledges or []
    )
    if hasattr(context, "subagents"):
        context.subagents = narrow_subagents(context.subagents, run.visible_subagents)

    workspace = user_workspace(home, str(run.uid))
    # file reads run off the event loop (a slow disk must not stall other runs), all in
    # one trip to a worker thread
    prompt_files, memory = await asyncio.to_thread(
        _read_workspace, workspace, memory=context.enable_memory
    )
    context.workspace_prompt = workspace_prompt(prompt_files)
    if context.enable_memory:
        context.memory = memory.text if memory else ""
    return PreparedContext(context, prompt_files, ignored)


def _read_workspace(
    workspace: Path, *, memory: bool
) -> tuple[list[WorkspaceFile], WorkspaceFile | None]:
    """The workspace's prompt files, and its memory file when ``memory``."""
    return read_prompt_files(workspace), (
        read_workspace_file(workspace, MEMORY_FILE) if memory else None
    )
