"""Request and response bodies. Unknown fields in a request body are refused.

Where a queue struct has exactly a response's fields, the API returns it as it is
(``Thread``, ``Job``, ``Occurrence``); the request bodies an agent is saved with are the
queue's ``AgentSettings`` and ``NewAgent``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec

from yuxi.queue.agents import AgentSettings, NewAgent
from yuxi.queue.threads import Thread

# the names the API's routes and OpenAPI schema use
SaveAgent = AgentSettings
CreateAgent = NewAgent


class Body(msgspec.Struct, forbid_unknown_fields=True):
    """Base of request bodies."""


class CreateThread(Body):
    agent_id: str
    project_id: UUID | None = None
    title: str = msgspec.field(default="")


class SubmitRun(Body):
    thread_id: UUID
    query: str
    request_id: str | None = None
    queue_policy: Literal["enqueue", "reject", "steer"] = "enqueue"
    # an image for this message (base64, or a data: URL), stored as an attachment
    image_content: str | None = None
    # ids of this thread's attachments the message refers to (each must exist)
    attachments: list[UUID] | None = None
    model_spec: str | None = None
    tool_approval_mode: Literal["auto", "ask"] | None = None


class ResumeRun(Body):
    resume: Any
    request_id: str | None = None


class RequestView(msgspec.Struct, frozen=True):
    request_id: str
    thread_id: UUID
    status: str
    queue_policy: str
    queue_position: int | None
    message_id: int | None
    run_id: UUID | None
    stream_url: str | None
    created_at: datetime


class RunTiming(msgspec.Struct, frozen=True):
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class RunView(msgspec.Struct, frozen=True):
    run_id: UUID
    thread_id: UUID
    request_id: str
    run_type: str
    created_by_run_id: UUID | None
    status: str
    error_type: str | None
    error_message: str | None
    timing: RunTiming
    usage: dict[str, Any] | None = None


class RunError(msgspec.Struct, frozen=True):
    type: str | None
    message: str | None


class RunResult(msgspec.Struct, frozen=True):
    status: str
    output: str | None
    final_message_id: int | None
    error: RunError | None
    # {input_tokens, output_tokens, total_tokens, cost, by_model, …}; null until recorded
    usage: dict[str, Any] | None = None


class HistoryRun(msgspec.Struct, frozen=True):
    run_id: UUID
    request_id: str
    run_type: str
    created_by_run_id: UUID | None
    status: str
    timing: RunTiming


class HistoryMessage(msgspec.Struct, frozen=True):
    id: int
    role: str
    content: str
    run_id: UUID | None
    request_id: str | None
    delivery_status: str | None
    metadata: dict[str, Any]
    created_at: datetime


class History(msgspec.Struct, frozen=True):
    thread: Thread
    runs: list[HistoryRun]
    history: list[HistoryMessage]


class QueueState(msgspec.Struct, frozen=True):
    status: str
    paused_reason: str | None
    blocking_run_id: UUID | None
    can_continue: bool


class ThreadRequests(msgspec.Struct, frozen=True):
    requests: list[RequestView]
    queue: QueueState


class ContinueResult(msgspec.Struct, frozen=True):
    thread_id: UUID
    run_id: UUID | None
    queue: QueueState


class CancelResult(msgspec.Struct, frozen=True):
    run_id: UUID
    status: str


class ThreadState(msgspec.Struct, frozen=True):
    agent_state: dict[str, Any]
    interrupt: dict[str, Any] | None


class ModelCapabilities(Body):
    streaming: bool | msgspec.UnsetType = msgspec.UNSET
    function_calling: bool | msgspec.UnsetType = msgspec.UNSET
    vision: bool | msgspec.UnsetType = msgspec.UNSET
    json_mode: bool | msgspec.UnsetType = msgspec.UNSET


PositiveInt = Annotated[int, msgspec.Meta(ge=1, le=10_000_000)]
Price = Annotated[float, msgspec.Meta(ge=0, le=1_000_000)]
BaseUrl = Annotated[str, msgspec.Meta(pattern=r"^https?://\S+$", max_length=500)]


class ModelBody(Body):
    """A model to register (``spec`` and ``name`` required) or the fields to change
    (only those sent; ``null`` clears an optional one, ``api_key: null`` removes the
    key)."""

    spec: str | msgspec.UnsetType = msgspec.UNSET
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | msgspec.UnsetType = (
        msgspec.UNSET
    )
    base_url: BaseUrl | msgspec.UnsetType | None = msgspec.UNSET
    api_key: str | msgspec.UnsetType | None = msgspec.UNSET
    capabilities: ModelCapabilities | msgspec.UnsetType = msgspec.UNSET
    context_window: PositiveInt | msgspec.UnsetType | None = msgspec.UNSET
    max_tokens: PositiveInt | msgspec.UnsetType | None = msgspec.UNSET
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | msgspec.UnsetType | None = (
        msgspec.UNSET
    )
    top_p: Annotated[float, msgspec.Meta(gt=0, le=1)] | msgspec.UnsetType | None = msgspec.UNSET
    price_input_per_mtok: Price | msgspec.UnsetType | None = msgspec.UNSET
    price_output_per_mtok: Price | msgspec.UnsetType | None = msgspec.UNSET
    price_cached_per_mtok: Price | msgspec.UnsetType | None = msgspec.UNSET
    enabled: bool | msgspec.UnsetType = msgspec.UNSET

    def present(self) -> dict[str, Any]:
        """The fields sent, as plain values (``capabilities`` a dict)."""
        sent = {
            f: getattr(self, f)
            for f in self.__struct_fields__
            if getattr(self, f) is not msgspec.UNSET
        }
        if "capabilities" in sent:
            caps = sent["capabilities"]
            sent["capabilities"] = {
                f: getattr(caps, f)
                for f in caps.__struct_fields__
                if getattr(caps, f) is not msgspec.UNSET
            }
        return sent


class RenameThread(Body):
    title: str


class AttachmentView(msgspec.Struct, frozen=True):
    """An attachment; ``path`` is relative to the conversation's workdir. ``created`` is
    false in an upload's answer when the same name and content were already attached."""

    id: UUID
    thread_id: UUID
    filename: str
    path: str
    bytes: int
    sha256: str
    media_type: str
    created_at: datetime
    created: bool = True


class FileEntry(msgspec.Struct, frozen=True):
    """A workdir entry; ``kind`` is file, directory or symlink (one leading outside the
    workdir, never followed); ``path`` is relative to the workdir."""

    name: str
    path: str
    kind: str
    bytes: int | None
    modified: datetime | None
    media_type: str | None


class FileListing(msgspec.Struct, frozen=True):
    path: str
    entries: list[FileEntry]
    truncated: bool


class ArtifactListing(msgspec.Struct, frozen=True):
    artifacts: list[FileEntry]
    truncated: bool


class CreateProject(Body):
    name: str
    workdir_path: str | None = None


class Project(msgspec.Struct, frozen=True):
    """``workdir_path`` is relative to the caller's workspace (``projects/<name>``);
    null for a directory an operator put outside it."""

    id: UUID
    name: str
    workdir_path: str | None
    created_at: datetime


class AgentSummary(msgspec.Struct, frozen=True):
    id: str
    name: str
    description: str
    backend_id: str
    is_subagent: bool


class PatchAgent(Body):
    """Only the configuration: what the console's configuration form saves."""

    config: dict[str, Any]


class AgentDetail(msgspec.Struct, frozen=True):
    id: str
    name: str
    description: str
    backend_id: str
    is_subagent: bool
    share_scope: str
    capabilities: list[str]
    configurable_items: list[dict[str, Any]]
    config: dict[str, Any]


class Health(msgspec.Struct, frozen=True, omit_defaults=True):
    status: str
    database: str
    workers: int
    # whether knowledge-base vector search uses pgvector's HNSW indexes, and why not
    # (left out while the database is down)
    vector_indexing: bool | None = None
    vector_search: str | None = None


class ErrorDetail(msgspec.Struct, frozen=True):
    code: str
    message: str


class ErrorBody(msgspec.Struct, frozen=True):
    error: ErrorDetail


class CreateScheduledJob(Body):
    project_id: UUID
    agent_slug: str
    prompt: str
    cron: str
    timezone: str
    tool_approval_mode: Literal["auto", "ask"] = "auto"
    enabled: bool = True


class UpdateScheduledJob(Body):
    """Only the fields present change."""

    project_id: UUID | msgspec.UnsetType = msgspec.UNSET
    agent_slug: str | msgspec.UnsetType = msgspec.UNSET
    prompt: str | msgspec.UnsetType = msgspec.UNSET
    cron: str | msgspec.UnsetType = msgspec.UNSET
    timezone: str | msgspec.UnsetType = msgspec.UNSET
    tool_approval_mode: Literal["auto", "ask"] | msgspec.UnsetType = msgspec.UNSET
    enabled: bool | msgspec.UnsetType = msgspec.UNSET
