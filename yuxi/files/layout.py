"""Where a worker keeps its caches under ``$YUXI_HOME``, in one place. The files
themselves are in the database (yuxi/files/store.py); these are copies.

```
<home>/workspaces/<uid>/                  a user's workspace tree (agents/, skills/)
<home>/workspaces/<uid>/threads/<thread>/ a conversation's workdir tree
<home>/workspaces/<uid>/projects/<dir>/   a project's workdir tree
<home>/cache/files/<tree>.json            what the cache of a tree has seen
<home>/skills/<sha256>/                   a shared skill version, named by its digest
<home>/knowledge/<kb_id>/<document_id>    (before the file store: imported by
                                          yuxi db migrate)
```
"""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

WORKSPACES = "workspaces"
THREADS = "threads"
PROJECTS = "projects"
KNOWLEDGE = "knowledge"
# top-level directories of a workspace that are trees of their own (workdirs)
WORKSPACE_OWN_TREES = (THREADS, PROJECTS)
SKILLS = "skills"


def user_workspace(home: Path, uid: UUID | str) -> Path:
    """The user's workspace: agents/AGENTS.md, USER.md and MEMORY.md live here."""
    return home / WORKSPACES / str(uid)


def conversation_workdir(
    home: Path, uid: UUID | str, thread_id: UUID | str, project_workdir: str | None
) -> Path:
    """The project's workdir, or a per-conversation directory in the user's workspace
    (``yuxi.thread_workdir_shown`` shows the same place relative to the workspace)."""
    if project_workdir:
        return Path(project_workdir)
    return user_workspace(home, uid) / THREADS / str(thread_id)


def projects_directory(home: Path, uid: UUID | str) -> Path:
    """Where a new project's workdir goes when its creator names none."""
    return user_workspace(home, uid) / PROJECTS


def skill_cache(home: Path) -> Path:
    """The parent of the shared skill versions' cached directories."""
    return home / SKILLS
