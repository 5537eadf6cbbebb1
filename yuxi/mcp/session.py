"""The MCP connections of one run: connect, discover and bind the tools, close.

``McpSession`` connects to every server of the run at once, each within its
``connect_timeout_seconds``; their tools are bound as ``<slug>__<tool>``, each call
limited to ``call_timeout_seconds``. A server that cannot be reached, or answers too
slowly, becomes a tool error the model sees (a ``<slug>__unavailable`` tool saying
why, and tool results saying a call failed) unless the run requires it
(``required_mcps``): then ``McpUnavailable`` ends the run with a clear error. The
session closes every connection when it exits (the run ended, failed or was
cancelled).

Errors name the server and the kind of failure, never the server's own text: a URL or
a header may hold a secret. A stdio server's process gets the worker's PATH, HOME and
locale and the server's own env, nothing else (not the worker's secrets).

A server that asks the user for input mid-call (elicitation) interrupts the run
(``langchain.mcp``'s interrupt-driven elicitation); resuming answers it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from langchain_core._api import suppress_langchain_beta_warning
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.errors import GraphBubbleUp

with suppress_langchain_beta_warning():
    from langchain.mcp import MCPAdapter

from fastmcp import Client
from fastmcp.client.transports import (
    ClientTransport,
    SSETransport,
    StdioTransport,
    StreamableHttpTransport,
)

from yuxi.mcp.secrets import open_map
from yuxi.models.secret_box import SecretBox
from yuxi.queue.mcp import McpConnection

log = logging.getLogger("yuxi.mcp")

# what model providers accept as a tool name
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
SEPARATOR = "__"
CLOSE_SECONDS = 5.0
# the worker's environment a stdio server inherits (never its keys or database URL)
INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "SYSTEMROOT")


class McpUnavailable(Exception):
    """A server the run requires could not be reached."""

    def __init__(self, slug: str, reason: str) -> None:
        super().__init__(f"MCP server {slug} is required by the agent but {reason}")
        self.slug = slug


@dataclass(frozen=True)
class McpServerSpec:
    """A server opened for connecting: its headers and env in the clear (never shown)."""

    id: str
    slug: str
    name: str
    transport: str
    url: str | None = None
    command: str | None = None
    args: tuple[str, ...] = ()
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    env: dict[str, str] = field(default_factory=dict, repr=False)
    connect_timeout_seconds: float = 10.0
    call_timeout_seconds: float = 60.0

    @classmethod
    def opened(cls, box: SecretBox, row: McpConnection) -> McpServerSpec:
        return cls(
            id=str(row.id),
            slug=row.slug,
            name=row.name,
            transport=row.transport,
            url=row.url,
            command=row.command,
            args=tuple(row.args),
            headers=open_map(box, row.id, "headers", row.headers_sealed),
            env=open_map(box, row.id, "env", row.env_sealed),
            connect_timeout_seconds=row.connect_timeout_seconds,
            call_timeout_seconds=row.call_timeout_seconds,
        )


def transport_of(spec: McpServerSpec) -> ClientTransport:
    if spec.transport == "stdio":
        env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ} | spec.env
        # keep_alive=False: the process ends with the run's connection (FastMCP keeps it
        # running for the next session otherwise)
        return StdioTransport(spec.command or "", list(spec.args), env=env, keep_alive=False)
    if spec.transport == "sse":
        return SSETransport(spec.url or "", headers=spec.headers or None)
    return StreamableHttpTransport(spec.url or "", headers=spec.headers or None)


# The key of the idempotency key in a tool call's _meta: "<run id>:<tool call id>", the
# same in every attempt of the run that makes the call, so a server that honours it can
# apply a call once.
IDEMPOTENCY_META = "io.yuxi/idempotency-key"

# the idempotency key of the MCP tool call under way in this task
_call_key: ContextVar[str | None] = ContextVar("yuxi_mcp_call_key", default=None)


class KeyedClient(Client):  # type: ignore[type-arg]
    """A FastMCP client whose tool calls carry the call's idempotency key in _meta: its
    session (what both FastMCP's calls and LangChain's elicitation loop call) adds it."""

    @property
    def session(self) -> Any:
        return _KeyedSession(super().session)


class _KeyedSession:
    def __init__(self, session: Any) -> None:
        self._session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    async def call_tool(self, name: str, arguments: Any = None, *args: Any, **kwargs: Any) -> Any:
        key = _call_key.get()
        if key is not None:
            kwargs["meta"] = {**(kwargs.get("meta") or {}), IDEMPOTENCY_META: key}
        return await self._session.call_tool(name, arguments, *args, **kwargs)


class KeyedTool(StructuredTool):
    """An MCP tool that knows its call's id while it runs (LangChain passes it to
    ``arun`` only), for the client to send as the idempotency key."""

    run_id: str = ""

    async def arun(self, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        call_id = kwargs.get("tool_call_id")
        token = _call_key.set(f"{self.run_id}:{call_id}" if call_id and self.run_id else None)
        try:
            return await super().arun(tool_input, *args, **kwargs)
        finally:
            _call_key.reset(token)


def adapter_of(spec: McpServerSpec) -> MCPAdapter:
    client: Client[Any] = KeyedClient(
        transport_of(spec),
        timeout=spec.call_timeout_seconds,
        init_timeout=spec.connect_timeout_seconds,
    )
    return MCPAdapter(client)


def failure_reason(error: BaseException, spec: McpServerSpec, *, connecting: bool) -> str:
    """What went wrong, without the server's own text (it may quote a URL or header)."""
    if isinstance(error, TimeoutError):
        limit = spec.connect_timeout_seconds if connecting else spec.call_timeout_seconds
        return f"did not answer within {limit:g} s"
    return f"failed ({type(error).__name__})"


def _tool_error(error: ToolException) -> Any:
    # an MCP tool's own error result keeps its content; ours are their text
    return getattr(error, "tool_content", None) or str(error)


def bind_tool(spec: McpServerSpec, tool: BaseTool, run_id: str = "") -> BaseTool | None:
    """``tool`` as ``<slug>__<name>``, each call limited to the server's call timeout,
    its failures turned into tool errors and its idempotency key (``run_id`` and the
    call's id) in the call's _meta; None when the name is not one a model provider
    accepts."""
    name = f"{spec.slug}{SEPARATOR}{tool.name}"
    if not TOOL_NAME.match(name):
        log.warning("MCP server %s: tool %r skipped (not a valid tool name)", spec.slug, tool.name)
        return None
    call = getattr(tool, "coroutine", None)
    if call is None:
        return None

    async def guarded(**arguments: Any) -> Any:
        try:
            async with asyncio.timeout(spec.call_timeout_seconds):
                return await call(**arguments)
        except (GraphBubbleUp, ToolException):
            raise  # an interrupt (elicitation) or the tool's own error result
        except Exception as error:
            reason = failure_reason(error, spec, connecting=False)
            raise ToolException(f"MCP server {spec.slug} {reason}") from None

    return KeyedTool(
        name=name,
        description=tool.description,
        args_schema=tool.args_schema or {"type": "object", "properties": {}},
        coroutine=guarded,
        response_format="content_and_artifact",
        metadata=tool.metadata,
        handle_tool_error=_tool_error,
        run_id=run_id,
    )


def unavailable_tool(spec: McpServerSpec, reason: str) -> BaseTool:
    """What the model sees of a server that could not be reached."""
    message = (
        f"MCP server {spec.name} ({spec.slug}) {reason}; its tools are unavailable in this run"
    )

    async def unavailable() -> str:
        return message

    return StructuredTool.from_function(
        coroutine=unavailable,
        name=f"{spec.slug}{SEPARATOR}unavailable",
        description=message + ".",
    )


class McpSession:
    """The connections of one run to ``specs``; ``tools`` once entered."""

    def __init__(
        self, specs: Sequence[McpServerSpec], *, required: Sequence[str] = (), run_id: str = ""
    ) -> None:
        self.specs = list(specs)
        self.run_id = run_id
        self.required = set(required)
        self.tools: list[BaseTool] = []
        # slug -> why it is unavailable
        self.failures: dict[str, str] = {}
        self._open: list[MCPAdapter] = []

    async def __aenter__(self) -> McpSession:
        try:
            results = await asyncio.gather(*(self._connect(spec) for spec in self.specs))
        except BaseException:
            # cancelled while connecting (the run was): close what is open already
            await asyncio.shield(self.close())
            raise
        for spec, result in zip(self.specs, results, strict=True):
            if isinstance(result, str):
                self.failures[spec.slug] = result
                self.tools.append(unavailable_tool(spec, result))
            else:
                self.tools.extend(result)
        missing = [slug for slug in self.failures if slug in self.required]
        if missing:
            await self.close()
            raise McpUnavailable(missing[0], self.failures[missing[0]])
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def _connect(self, spec: McpServerSpec) -> list[BaseTool] | str:
        adapter = adapter_of(spec)
        try:
            async with asyncio.timeout(spec.connect_timeout_seconds):
                await adapter.__aenter__()
                self._open.append(adapter)
                discovered = await adapter.list_tools()
        except Exception as error:
            reason = failure_reason(error, spec, connecting=True)
            log.info("MCP server %s: %s", spec.slug, reason)
            return reason
        return [
            bound
            for tool in discovered
            if (bound := bind_tool(spec, tool, self.run_id)) is not None
        ]

    async def close(self) -> None:
        """Closes every connection (each within a few seconds, whatever the server does)."""
        adapters, self._open = self._open, []
        for adapter in reversed(adapters):
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CLOSE_SECONDS):
                    await adapter.__aexit__(None, None, None)


async def discover_tools(spec: McpServerSpec) -> tuple[list[dict[str, Any]], str | None]:
    """The server's tools as ``[{name, description, input_schema}]``, or the error met
    connecting (for ``GET /api/mcp-servers/{slug}/tools``)."""
    adapter = adapter_of(spec)
    try:
        async with asyncio.timeout(spec.connect_timeout_seconds + spec.call_timeout_seconds):
            async with adapter:
                listed = await adapter.client.list_tools()
    except Exception as error:
        return [], f"MCP server {spec.slug} {failure_reason(error, spec, connecting=True)}"
    return [
        {
            "name": tool.name,
            "tool": f"{spec.slug}{SEPARATOR}{tool.name}",
            "description": tool.description or "",
            "input_schema": getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", {}),
        }
        for tool in listed
    ], None
