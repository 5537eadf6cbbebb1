"""prepare_agent_runtime_context: from stored configuration to the Context one run uses."""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from yuxi.agents.base import BaseAgent
from yuxi.agents.context import BaseContext
from yuxi.agents.models import Capabilities, ModelSpecError, RegisteredModel
from yuxi.agents.subagent import SubAgentContext
from yuxi.files.layout import conversation_workdir, user_workspace
from yuxi.files.workspace import (
    MEMORY_FILE,
    WorkspaceFile,
    ensure_agents_template,
    read_prompt_files,
    read_workspace_file,
    workspace_prompt,
)
from yuxi.models.registry import model_context
from yuxi.models.secret_box import SecretBox
from yuxi.queue.runs import RunClaim
from yuxi.resources import (
    RESOURCE_KINDS,
    SKILLS,
    ResourceCatalog,
    narrow,
    narrow_subagents,
    resolve,
)
from yuxi.skills.resolve import RunSkills, SkillRecord, scan_skills
from yuxi.skills.run import prepare_run_skills, shared_skills, skills_wanted


@dataclass
class PreparedContext:
    """The Context plus what preparing it read, for the manifest."""

    context: BaseContext
    prompt_files: list[WorkspaceFile] = field(default_factory=list)
    ignored_config_keys: list[str] = field(default_factory=list)
    skills: RunSkills | None = None
    # the workspace had no agents/: the AGENTS.md template was written into it
    template_written: bool = False


def run_workdir(home: Path, claim: RunClaim) -> Path:
    """The run's workdir on this host: the cache of the workdir tree its claim names
    (``<home>/workspaces/<uid>/<root>``), or, for a claim without file trees, the
    conversation's workdir as the layout places it."""
    run = claim.run
    if claim.files is not None and claim.files.workdir is not None:
        return user_workspace(home, run.uid) / claim.files.workdir.root
    return conversation_workdir(home, run.uid, run.thread_id, claim.agent.workdir_path)


async def prepare_agent_runtime_context(
    agent: BaseAgent, claim: RunClaim, *, catalog: ResourceCatalog, home: Path
) -> PreparedContext:
    """Merges the agent's configurable fields, the run's model and approval mode, the run's
    identity and workdir, the user's workspace prompts, and the resources the user may use
    (narrowed per the resource rules). A child run (run_type ``subagent``) uses the
    conversation's files, its own checkpoint thread, and never the user's memory."""
    run = claim.run
    context = agent.context_schema()
    stored = (claim.agent.config or {}).get("context") or {}
    ignored = context.update_from_dict(stored if isinstance(stored, dict) else {})

    payload = claim.input.payload
    context.model = str(payload.get("model_spec") or context.model)
    context.registered_model = registered_model(claim, home)
    context.attachments = [
        {"path": a.get("path"), "media_type": a.get("media_type"), "bytes": a.get("bytes")}
        for a in claim.input.attachments
    ]
    # the one place the approval mode is read from the run's input; the rest of the
    # runtime reads the prepared Context
    context.set_tool_approval_mode(payload.get("tool_approval_mode"))
    context.uid = str(run.uid)
    context.thread_id = str(run.thread_id)
    context.run_id = str(run.run_id)
    context.workdir = str(run_workdir(home, claim))
    # the one answer to "is this a subagent's run": a child run, or a subagent agent's
    context.is_subagent_runtime = context.is_subagent_runtime or run.is_subagent
    if isinstance(context, SubAgentContext):
        _scope_subagent(context, claim)

    selected_skills = context.skills
    for kind in RESOURCE_KINDS:
        if kind is SKILLS:
            continue  # resolved below, with the user's personal skills
        accessible = await catalog.accessible(kind, run.uid)
        field = kind.context_field
        setattr(context, field, narrow(getattr(context, field), accessible))

    workspace = user_workspace(home, str(run.uid))
    # the user's memory is a main agent's only (a subagent gets neither text nor tools)
    uses_memory = context.enable_memory and not context.is_subagent_runtime
    shared = await shared_skills(catalog, run.uid) if skills_wanted(selected_skills) else None
    # file reads run off the event loop (a slow disk must not stall other runs), all in
    # one trip to a worker thread: the workspace's prompt files and memory, the skills on
    # disk, and the run's workdir made ready
    disk = await asyncio.to_thread(
        _read_disk, workspace, home, Path(context.workdir), memory=uses_memory, shared=shared
    )
    # shared and personal skills, their dependency closure, files, prompt; their tools
    # and MCP servers join context.tools / context.mcps
    skills = await prepare_run_skills(
        context,
        selected_skills,
        catalog=catalog,
        uid=run.uid,
        home=home,
        shared=shared,
        scanned=disk.skills,
    )
    # what the run resolved of each kind with entries (skills add MCP servers above)
    for kind in RESOURCE_KINDS:
        if kind.resolved_field is not None:
            selected = getattr(context, kind.context_field) or []
            entries = await resolve(kind, catalog, run.uid, selected)
            setattr(context.resolved, kind.resolved_field, entries)
    if hasattr(context, "subagents"):
        context.subagents = narrow_subagents(context.subagents, claim.agent.visible_subagents)

    context.workspace_prompt = workspace_prompt(disk.prompt_files)
    context.memory = disk.memory.text if disk.memory else ""
    return PreparedContext(context, disk.prompt_files, ignored, skills, disk.template_written)


def registered_model(claim: RunClaim, home: Path) -> RegisteredModel | None:
    """The registry's model of the run's spec (``claim.model``), its key opened; None when
    the spec has no registry entry. ModelSpecError when the model was disabled after
    the request was accepted."""
    row = claim.model.row
    if row is None:
        return None
    if not row.get("enabled", True):
        raise ModelSpecError(f"model {row.get('spec')} is disabled")
    key = None
    if claim.model.key_sealed is not None:
        opened = _secrets(home).open(bytes(claim.model.key_sealed), model_context(row["id"]))
        key = SecretStr(opened)
    return RegisteredModel(
        id=str(row["id"]),
        spec=str(row["spec"]),
        version=str(row.get("updated_at")),
        byok=row.get("owner_uid") is not None,
        base_url=row.get("base_url"),
        api_key=key,
        capabilities=Capabilities(
            streaming=bool(row.get("streaming", True)),
            tool_calling=bool(row.get("function_calling", True)),
            vision=bool(row.get("vision", False)),
            json_mode=bool(row.get("json_mode", False)),
        ),
        context_window=row.get("context_window"),
        max_tokens=row.get("max_tokens"),
        temperature=row.get("temperature"),
        top_p=row.get("top_p"),
    )


@functools.lru_cache(maxsize=4)
def _secrets(home: Path) -> SecretBox:
    return SecretBox.from_env(home)


def _scope_subagent(context: SubAgentContext, claim: RunClaim) -> None:
    """A child run's hidden fields: files stay with the parent conversation (its
    workdir is the conversation's), skills and checkpoints go with the child's own
    checkpoint thread (the run id, as the executor's checkpoint config)."""
    run = claim.run
    context.parent_thread_id = str(run.thread_id)
    context.file_thread_id = str(run.thread_id)
    context.skills_thread_id = str(run.run_id if run.is_subagent else run.thread_id)


@dataclass(frozen=True)
class _Disk:
    prompt_files: list[WorkspaceFile]
    memory: WorkspaceFile | None
    skills: tuple[list[SkillRecord], set[str]] | None
    template_written: bool = False


def _read_disk(
    workspace: Path,
    home: Path,
    workdir: Path,
    *,
    memory: bool,
    shared: list[SkillRecord] | None,
) -> _Disk:
    """What preparing a run reads from disk (blocking): the workspace's prompt files, its
    memory file when ``memory``, the skills on disk (``scan_skills``) unless ``shared``
    is None; and it makes the run's workdir. A workspace without ``agents/`` gets the
    AGENTS.md template first (comments only: it adds nothing to the prompt)."""
    written = ensure_agents_template(workspace)
    workdir.mkdir(parents=True, exist_ok=True)
    return _Disk(
        template_written=written,
        prompt_files=read_prompt_files(workspace),
        memory=read_workspace_file(workspace, MEMORY_FILE) if memory else None,
        skills=None if shared is None else scan_skills(workspace, home, shared),
    )
