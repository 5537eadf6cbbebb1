"""The graphs of a LangGraph project (``langgraph.json``, read by ``project``) served
as agent backends, one ``GraphAgent`` per graph id (the slug of the agent the API seeds
for it).

A graph entry names a compiled graph, a ``StateGraph`` (compiled at load) or a factory
that returns one of them, sync or async, taking nothing, the run's ``RunnableConfig`` or
a ``ServerRuntime`` (langgraph-api's factory semantics). Registering a project reads
the file only; a graph's module is imported on first use (a run, its schemas) or by
``preload`` (a worker's start). A graph that fails to import fails its own runs with
the import error; the other graphs and backends keep working. Nothing here imports
LangGraph until a graph is loaded.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import logging
import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from yuxi.agents.base import BaseAgent
from yuxi.agents.context import BaseContext
from yuxi.agents.project import add_dependencies, apply_env, config_path, read_project
from yuxi.agents.registry import get_backend, register_backend, unregister_backend

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph
    from langgraph.store.base import BaseStore

log = logging.getLogger("yuxi.agents.graphs")


class GraphLoadError(RuntimeError):
    """A graph of the project could not be imported or built (its runs fail with it)."""


@dataclass
class GraphSpec:
    """One entry of ``graphs``: the backend id, where the graph is, and its loaded form
    (the graph object or factory) or why it did not load, once tried."""

    graph_id: str
    target: str  # "./src/agent.py:graph" or "package.module:graph"
    root: Path  # the directory of langgraph.json
    description: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _loaded: Any = field(default=None, repr=False)
    _error: str | None = field(default=None, repr=False)

    @property
    def shown(self) -> str:
        """The target as clients see it: never an absolute path of this host."""
        where, _, attr = self.target.rpartition(":")
        if where.startswith("/"):
            return f"{Path(where).name}:{attr}"
        return self.target

    def load(self) -> Any:
        """The object the entry names (imported once; an import error is kept and
        raised again as ``GraphLoadError``). Blocking: call it in a thread."""
        with self._lock:
            if self._error is None and self._loaded is None:
                try:
                    self._loaded = _compiled(self._import())
                except (Exception, SystemExit) as error:  # a module may even exit
                    self._error = self._describe(error)
            if self._error is not None:
                raise GraphLoadError(
                    f"graph {self.graph_id!r} ({self.shown}) failed to load: {self._error}"
                )
            return self._loaded

    def _import(self) -> Any:
        where, _, attr = self.target.rpartition(":")
        if not where or not attr:
            raise ValueError(
                "a graph is named as ./path/to/file.py:variable or package.module:variable"
            )
        if where.endswith(".py") or "/" in where:
            path = (self.root / where).resolve()
            if not path.is_file():
                raise FileNotFoundError(f"no file {self.shown.rpartition(':')[0]}")
            root = self.root.resolve()
            shown = path.relative_to(root) if path.is_relative_to(root) else path.name
            # one module per file, whichever graphs name it
            name = "yuxi_graph_" + re.sub(r"\W", "_", str(shown))
            module = sys.modules.get(name)
            if module is None:
                spec = importlib.util.spec_from_file_location(name, path)
                if spec is None or spec.loader is None:
                    raise ImportError(f"{where} is not a Python module")
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                try:
                    spec.loader.exec_module(module)
                except BaseException:
                    sys.modules.pop(name, None)
                    raise
        else:
            module = importlib.import_module(where)
        try:
            return getattr(module, attr)
        except AttributeError:
            raise AttributeError(f"{where} has no {attr!r}") from None

    def _describe(self, error: BaseException) -> str:
        text = f"{type(error).__name__}: {error}"
        if isinstance(error, ModuleNotFoundError) and error.name:
            text += (
                f" (a dependency that is not installed: yuxi installs nothing; install"
                f" {error.name.split('.')[0]!r} into yuxi's environment)"
            )
        # what clients see never names the host's directories
        return text.replace(str(self.root.resolve()), ".").replace(str(self.root), ".")

    async def graph(
        self,
        config: dict[str, Any],
        *,
        checkpointer: BaseCheckpointSaver[Any] | None,
        store: BaseStore | None = None,
        reading: bool = False,
    ) -> CompiledStateGraph[Any, Any, Any, Any]:
        """The graph for one run (or, ``reading``, for its schemas): a factory is called
        with the run's config or a ``ServerRuntime``; the result is a copy of the user's
        compiled graph bound to ``checkpointer`` (and ``store``), never the shared object
        mutated."""
        loaded = await asyncio.to_thread(self.load)
        try:
            graph = await self._built(loaded, config, store, reading)
        except GraphLoadError:
            raise
        except Exception as error:
            why = self._describe(error)
            raise GraphLoadError(
                f"graph {self.graph_id!r} ({self.shown}) could not be built: {why}"
            ) from error
        update: dict[str, Any] = {"checkpointer": checkpointer}
        # the seam of the process-wide store: the executor hands it here, and every run of
        # the graph sees it through get_store() / runtime.store
        if store is not None:
            update["store"] = store
        bound: CompiledStateGraph[Any, Any, Any, Any] = graph.copy(update=update)
        return bound

    async def _built(self, loaded: Any, config: dict[str, Any], store: Any, reading: bool) -> Any:
        from langgraph.graph import StateGraph
        from langgraph.pregel import Pregel

        value = loaded
        if not isinstance(value, (Pregel, StateGraph)) and callable(value):
            value = _call_factory(value, config, store, reading)
            if inspect.isawaitable(value):
                value = await value
        if isinstance(value, StateGraph):
            return value.compile()
        if isinstance(value, Pregel):
            return value
        raise TypeError(
            f"{self.shown} is {type(value).__name__}, not a compiled graph, a StateGraph"
            " or a factory returning one"
        )


def _compiled(value: Any) -> Any:
    """A module-level ``StateGraph`` compiled (once, at load); anything else as it is."""
    from langgraph.graph import StateGraph

    return value.compile() if isinstance(value, StateGraph) else value


def _call_factory(factory: Any, config: dict[str, Any], store: Any, reading: bool) -> Any:
    """A graph factory called as langgraph-api calls it: with no argument, a
    ``ServerRuntime`` (a parameter so annotated or named ``runtime``) or the config."""
    try:
        parameters = [
            p
            for p in inspect.signature(factory).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
    except (TypeError, ValueError):
        parameters = []
    if not parameters:
        result = factory()
    else:
        first = parameters[0]
        annotation = str(first.annotation)
        if "ServerRuntime" in annotation or first.name == "runtime":
            from langgraph_sdk.runtime import _ExecutionRuntime, _ReadRuntime

            runtime: Any = (
                _ReadRuntime(access_context="assistants.read", store=store)
                if reading
                else _ExecutionRuntime(
                    access_context="threads.create_run", store=store, context=None
                )
            )
            result = factory(runtime)
        else:
            result = factory(config)
    if hasattr(result, "__aenter__") or hasattr(result, "__enter__"):
        raise TypeError(
            "a graph factory that is a context manager is not supported by yuxi yet:"
            " return the graph"
        )
    return result


@dataclass
class Project:
    """A loaded ``langgraph.json``: its directory and graphs, by id."""

    root: Path
    graphs: dict[str, GraphSpec]


_projects: dict[Path, Project] = {}
_projects_lock = threading.Lock()


def register_project(path: Path) -> Project:
    """Reads the project, applies its ``env`` and ``dependencies`` and registers one
    backend per graph (once per process: a second call returns the same project). A
    graph id that is not a valid agent slug or that another backend holds is logged and
    left out; nothing is imported."""
    resolved = config_path(path).resolve()
    with _projects_lock:
        if resolved in _projects:
            return _projects[resolved]
        root, config = read_project(path)
        apply_env(root, config.get("env"))
        add_dependencies(root, config.get("dependencies", []))
        graphs: dict[str, GraphSpec] = {}
        for key, value in config["graphs"].items():
            target = value["path"] if isinstance(value, dict) else value
            description = str(value.get("description") or "") if isinstance(value, dict) else ""
            if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,62}", key):
                log.error(
                    "graph %r left out: a graph id is 1-63 characters of a-z, 0-9, _ and -", key
                )
                continue
            spec = GraphSpec(key, target, root, description)
            cls = type(
                f"Graph_{key.replace('-', '_')}",
                (GraphAgent,),
                {
                    "backend_id": key,
                    "name": key,
                    "spec": spec,
                    "description": description or f"the graph {key}",
                },
            )
            try:
                register_backend(cls)
            except ValueError as error:
                log.error("graph %r left out: %s", key, error)
                continue
            graphs[key] = spec
        project = Project(root, graphs)
        _projects[resolved] = project
        log.info("graphs of %s: %s", resolved, ", ".join(graphs) or "none")
        return project


def unregister_project(path: Path) -> None:
    """Removes the project's backends from this process (tests, embedding); its
    environment and ``sys.path`` entries stay."""
    with _projects_lock:
        project = _projects.pop(config_path(path).resolve(), None)
    for key in project.graphs if project is not None else ():
        unregister_backend(key)


def preload(project: Project) -> dict[str, str]:
    """Imports every graph of the project (blocking), logging each that fails with its
    error; returns the failures by graph id."""
    failed: dict[str, str] = {}
    for key, spec in project.graphs.items():
        try:
            spec.load()
        except GraphLoadError as error:
            log.error("%s; its runs fail with this error", error)
            failed[key] = str(error)
    return failed


class GraphAgent(BaseAgent):
    """The backend of one graph of a ``langgraph.json`` project (a subclass per graph,
    made by ``register_project``)."""

    spec: ClassVar[GraphSpec]
    context_schema: ClassVar[type[BaseContext]] = BaseContext

    async def get_graph(
        self,
        context: BaseContext,
        *,
        checkpointer: BaseCheckpointSaver[Any] | None = None,
        store: BaseStore | None = None,
    ) -> CompiledStateGraph[Any, Any, Any, Any]:
        # what the run's own config carries (yuxi.runtime.executor), for a factory
        config = {
            "configurable": {
                "thread_id": context.thread_id,
                "run_id": context.run_id,
                "langgraph_auth_user_id": context.uid,
            }
        }
        return await self.spec.graph(config, checkpointer=checkpointer, store=store)

    def run_context(self, graph: Any) -> Any:
        """What the graph's ``runtime.context`` is: its ``context_schema`` with its
        defaults (per-run values are not passed yet), or None without one."""
        return {} if getattr(graph, "context_schema", None) is not None else None

    async def schemas(self) -> dict[str, Any]:
        """The graph's own input, output, state and context schemas (JSON schema)."""
        graph = await self.spec.graph({"configurable": {}}, checkpointer=None, reading=True)
        return await asyncio.to_thread(_schemas_of, graph)


def _schemas_of(graph: Any) -> dict[str, Any]:
    """Each schema the graph declares; one pydantic cannot describe (``typing.TypedDict``
    on Python 3.11, an arbitrary class) is an open object, and logged."""

    def described(what: str, schema: Any) -> Any:
        try:
            return schema()
        except Exception as error:
            log.warning("graph %s: its %s cannot be described: %s", graph.name, what, error)
            return {"title": what, "type": "object"}

    def state() -> Any:
        builder = getattr(graph, "builder", None)
        if builder is None or getattr(builder, "state_schema", None) is None:
            return graph.get_output_jsonschema()
        from pydantic import TypeAdapter

        return TypeAdapter(builder.state_schema).json_schema()

    return {
        "input_schema": described("input", graph.get_input_jsonschema),
        "output_schema": described("output", graph.get_output_jsonschema),
        "state_schema": described("state", state),
        "context_schema": described("context", graph.get_context_jsonschema),
    }


def graph_backend(backend_id: str) -> GraphAgent | None:
    """The backend of a project's graph by id, or None (another kind, or unknown)."""
    try:
        backend = get_backend(backend_id)
    except LookupError:
        return None
    return backend if isinstance(backend, GraphAgent) else None
