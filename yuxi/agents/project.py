"""A LangGraph project's ``langgraph.json``, read as langgraph-cli reads it: ``graphs``
(id → ``./file.py:variable`` or ``{"path": …, "description": …}``), ``dependencies``
(local paths go on ``sys.path``; a package must already be installed: yuxi installs
nothing and logs one that is missing) and ``env`` (a dotenv file or an object, applied
to this process's environment; variables already set keep their values; only names are
logged). Nothing here imports a graph."""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger("yuxi.agents.graphs")

CONFIG_FILE = "langgraph.json"


class ProjectError(ValueError):
    """The project's ``langgraph.json`` cannot be used (the server does not start)."""


def config_path(path: Path) -> Path:
    """The ``langgraph.json`` that ``path`` names (the file, or the directory holding it)."""
    path = Path(path)
    return path / CONFIG_FILE if path.is_dir() else path


def read_project(path: Path) -> tuple[Path, dict[str, Any]]:
    """The project's directory and its parsed configuration (``ProjectError`` naming
    what is wrong)."""
    file = config_path(path)
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProjectError(f"no {CONFIG_FILE} at {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ProjectError(f"cannot read {file}: {error}") from None
    if not isinstance(config, dict):
        raise ProjectError(f"{file} must hold a JSON object")
    graphs = config.get("graphs")
    if not isinstance(graphs, dict) or not graphs:
        raise ProjectError(f'{file} needs "graphs": {{"id": "./file.py:variable", ...}}')
    for key, value in graphs.items():
        target = value.get("path") if isinstance(value, dict) else value
        if not isinstance(target, str):
            raise ProjectError(
                f'graph {key!r} in {file} must be "./file.py:variable" or {{"path": ...}}'
            )
    dependencies = config.get("dependencies", [])
    if not isinstance(dependencies, list) or not all(isinstance(d, str) for d in dependencies):
        raise ProjectError(f'"dependencies" in {file} must be a list of strings')
    env = config.get("env")
    if env is not None and not isinstance(env, (str, dict)):
        raise ProjectError(f'"env" in {file} must be a file name or an object')
    return file.parent, config


def apply_env(root: Path, env: str | dict[str, Any] | None) -> None:
    if env is None:
        return
    if isinstance(env, str):
        file = root / env
        try:
            values = parse_dotenv(file.read_text(encoding="utf-8"))
        except OSError as error:
            log.warning("env file %s of the project not read: %s", env, error.strerror or error)
            return
    else:
        values = {str(k): "" if v is None else str(v) for k, v in env.items()}
    for key, value in values.items():
        os.environ.setdefault(key, value)
    # the names only: values may be secrets
    log.info("project environment: %d variable(s) (%s)", len(values), ", ".join(sorted(values)))


def parse_dotenv(text: str) -> dict[str, str]:
    """``KEY=value`` lines (``export`` allowed, ``#`` comments, quoted values)."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        key, value = key.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        if key:
            values[key] = value
    return values


def add_dependencies(root: Path, dependencies: list[str]) -> None:
    for dependency in dependencies:
        if dependency.startswith((".", "/")):
            path = str((root / dependency).resolve())
            if path not in sys.path:
                sys.path.insert(0, path)
            continue
        name = re.split(r"[\s<>=!~\[;@]", dependency, maxsplit=1)[0]
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            log.error(
                "project dependency %r is not installed; yuxi installs nothing: install it"
                " into yuxi's environment (graphs that import it fail)",
                dependency,
            )
