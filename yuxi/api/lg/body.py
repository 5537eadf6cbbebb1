"""What a LangGraph run body asks for, in yuxi's terms, or 422 for what yuxi refuses."""

from __future__ import annotations

import json
from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from typing import Any

from yuxi.api.lg.errors import Refused
from yuxi.queue.errors import InvalidInput

STREAM_MODES = (
    "values",
    "updates",
    "messages",
    "messages-tuple",
    "custom",
    "events",
    "debug",
    "tasks",
    "checkpoints",
)
STRATEGIES = ("enqueue", "reject", "interrupt")
# configurable keys LangGraph itself puts in a config, not the agent's
_RESERVED = ("thread_id", "checkpoint_id", "checkpoint_ns", "run_id", "assistant_id", "graph_id")
# the agent's configurable items a run may set, and the request field each becomes
_PER_RUN = {"model": "model_spec", "tool_approval_mode": "tool_approval_mode"}
# approve and reject answer a tool approval; respond (with a message) answers a question
_DECISIONS = ("approve", "reject", "respond")
_MAX_CONFIGURABLE_BYTES = 16 * 1024


@dataclass(frozen=True)
class RunBody:
    """A run body: the text to submit or the resume value, and how."""

    assistant_id: str
    query: str | None
    blocks: list[Block]
    state: dict[str, Any] | None
    resume: Any
    has_resume: bool
    strategy: str
    stream_modes: list[str]
    metadata: dict[str, Any]
    model_spec: str | None
    tool_approval_mode: str | None
    checkpoint_id: str | None
    if_not_exists: str
    extra: dict[str, Any] = field(default_factory=dict)
    open_keys: set[str] = field(default_factory=set)
    # stream_subgraphs: a subagent's run streams inside its parent's, namespaced
    subgraphs: bool = False


def stream_modes(value: Any, default: Sequence[str] = ("values",)) -> list[str]:
    if value is None:
        return list(default)
    modes = [value] if isinstance(value, str) else value
    if not isinstance(modes, list) or not all(isinstance(m, str) for m in modes):
        raise InvalidInput("stream_mode must be a string or a list of strings")
    for mode in modes:
        if mode not in STREAM_MODES:
            raise Refused(
                f"stream_mode {mode!r} is not supported; yuxi streams {', '.join(STREAM_MODES)}"
            )
    return list(dict.fromkeys(modes))


def parse_run(body: dict[str, Any], configurable_keys: Sequence[str] | None = None) -> RunBody:
    """The run body ``body``; ``configurable_keys``: the agent's configurable items
    (None: not checked yet, the caller checks ``settings_of`` itself)."""
    if not isinstance(body, dict):
        raise InvalidInput("the run body must be a JSON object")
    assistant = body.get("assistant_id")
    if not isinstance(assistant, str) or not assistant:
        raise InvalidInput("assistant_id is required")
    _refuse_unsupported(body)
    strategy = body.get("multitask_strategy") or "enqueue"
    if strategy == "rollback":
        raise Refused(
            "multitask_strategy rollback is not supported: a run's events and messages are"
            " durable and never deleted; use interrupt"
        )
    if strategy not in STRATEGIES:
        raise InvalidInput(f"multitask_strategy must be one of {', '.join(STRATEGIES)}")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidInput("metadata must be an object")
    if_not_exists = body.get("if_not_exists") or "reject"
    if if_not_exists not in ("reject", "create"):
        raise InvalidInput("if_not_exists must be reject or create")
    given = _input_of(body)
    extra, open_keys = settings_of(body)
    return RunBody(
        assistant_id=assistant,
        query=given.query,
        blocks=given.blocks,
        state=given.state,
        resume=given.resume,
        has_resume=given.has_resume,
        strategy=strategy,
        stream_modes=stream_modes(body.get("stream_mode")),
        metadata=metadata,
        model_spec=None,
        tool_approval_mode=None,
        checkpoint_id=_checkpoint_id(body),
        if_not_exists=if_not_exists,
        extra=extra,
        open_keys=open_keys,
        subgraphs=bool(body.get("stream_subgraphs")),
    )


def _refuse_unsupported(body: dict[str, Any]) -> None:
    if body.get("interrupt_before") or body.get("interrupt_after"):
        raise Refused(
            "interrupt_before and interrupt_after are not supported: a yuxi agent stops only"
            " for a question (ask_user) or a tool approval (tool_approval_mode ask)"
        )
    after = body.get("after_seconds")
    if after is not None and (not isinstance(after, (int, float)) or after > 0):
        raise Refused("after_seconds is not supported: schedule runs with crons instead")
    if body.get("webhook"):
        raise Refused("webhook is not supported: follow the run with join or its stream")


def _checkpoint_id(body: dict[str, Any]) -> str | None:
    checkpoint = body.get("checkpoint")
    if isinstance(checkpoint, dict) and checkpoint.get("checkpoint_id"):
        return str(checkpoint["checkpoint_id"])
    if body.get("checkpoint_id"):
        return str(body["checkpoint_id"])
    return None


@dataclass(frozen=True)
class Block:
    """A file a user message carries (an image or a document block), still base64."""

    kind: str  # "image" or "file"
    data: str  # base64
    mime_type: str
    filename: str | None


@dataclass(frozen=True)
class RunInput:
    """What a run body's input says: the user's text and files, or a resume."""

    query: str | None = None
    blocks: list[Block] = field(default_factory=list)
    resume: Any = None
    has_resume: bool = False
    # an input without messages: a state for a project's graph that takes no messages
    state: dict[str, Any] | None = None


def _input_of(body: dict[str, Any]) -> RunInput:
    command = body.get("command")
    run_input = body.get("input")
    if command is not None:
        if not isinstance(command, dict):
            raise InvalidInput("command must be an object")
        # RemoteGraph sends Command(resume=…) as {"resume": …, "goto": [], "update": None}
        for key in ("goto", "update"):
            if command.get(key) not in (None, [], {}, ""):
                raise Refused(
                    f"command.{key} is not supported: a yuxi run only resumes the latest"
                    " interrupted run (command.resume)"
                )
        if "resume" not in command:
            raise InvalidInput("command needs resume")
        # as on LangGraph's server, a command's input is ignored (agent-chat-ui sends {})
        return RunInput(resume=_resume_value(command["resume"]), has_resume=True)
    if run_input is None:
        if _checkpoint_id(body) is not None:
            raise Refused(
                "a run from a checkpoint without input (regenerate) is not supported: yuxi"
                " does not fork a thread; send the message again"
            )
        raise Refused("a run needs input.messages (a run without input is not supported)")
    return _messages_of(run_input)


def _resume_value(value: Any) -> Any:
    """A resume value as yuxi's resume takes it: HITL decisions (langchain's
    ``{"decisions": [...]}``, or the older agent-inbox list ``[{"type": "accept" |
    "ignore" | "response", "args"}]``) become approve or reject decisions; edits are
    refused; anything else (a question's answer) passes as it is."""
    if isinstance(value, list) and value and all(_inbox_reply(v) for v in value):
        return {"decisions": [_from_inbox(v) for v in value]}
    if _inbox_reply(value):
        return {"decisions": [_from_inbox(value)]}
    if isinstance(value, dict) and "decisions" in value:
        decisions = value["decisions"]
        if not isinstance(decisions, list) or not decisions:
            raise InvalidInput("decisions must be a non-empty list")
        for decision in decisions:
            kind = decision.get("type") if isinstance(decision, dict) else None
            if kind not in _DECISIONS:
                raise Refused(
                    f"decision {kind!r} is not supported: yuxi's tool approval takes approve"
                    " or reject, a question respond"
                )
        return {"decisions": decisions}
    return value


_INBOX = ("accept", "ignore", "response", "edit")


def _inbox_reply(value: Any) -> bool:
    return (
        isinstance(value, dict) and value.get("type") in _INBOX and set(value) <= {"type", "args"}
    )


def _from_inbox(reply: dict[str, Any]) -> dict[str, Any]:
    """The older agent-inbox answer (``action_request`` + ``config.allow_*`` shape):
    accept approves; ignore rejects; a response responds with its text (a question's
    answer, or for a tool approval a rejection the model reads); edit is refused as
    yuxi's edit decision is."""
    kind = reply["type"]
    if kind == "accept":
        return {"type": "approve"}
    if kind == "ignore":
        return {"type": "reject"}
    if kind == "response":
        args = reply.get("args")
        return {"type": "respond", "message": args if isinstance(args, str) else str(args)}
    raise Refused("decision 'edit' is not supported: yuxi's tool approval takes approve or reject")


def _messages_of(run_input: Any) -> RunInput:
    if not isinstance(run_input, dict):
        raise Refused("input must be an object with messages")
    # agent-chat-ui sends its artifact context in the input (absent or null when empty)
    unknown = sorted(k for k, v in run_input.items() if k != "messages" and v is not None)
    if unknown and run_input.get("messages") is None:
        return RunInput(state=run_input)  # the caller knows whether the graph takes it
    if unknown:
        raise Refused(
            f"input keys {unknown} are not supported: a yuxi agent's state is its messages"
            " (send settings as config.configurable or context)"
        )
    messages = run_input.get("messages")
    if isinstance(messages, (str, dict)):
        messages = [messages]
    if not isinstance(messages, list) or not messages:
        raise InvalidInput("input.messages must be a non-empty list")
    texts: list[str] = []
    blocks: list[Block] = []
    answers: list[str] = []
    for message in messages:
        role = _role(message)
        if role == "tool":
            # answers a pending tool call (agent-chat-ui closes an interrupted call so);
            # alone it is the resume value, with a user message the user's message wins
            answers.append(_text(message, []))
        elif role in ("user", "human"):
            texts.append(_text(message, blocks))
        else:
            raise Refused(
                f"input messages of role {role!r} are not supported: a run's input is the"
                " user's message (or a tool message answering the pending tool call)"
            )
    if not texts and not blocks:
        return RunInput(resume=answers[-1], has_resume=True)
    return RunInput(query="\n\n".join(t for t in texts if t) or "", blocks=blocks)


def _role(message: Any) -> str | None:
    if isinstance(message, str):
        return "user"
    if not isinstance(message, dict):
        raise InvalidInput("each input message must be an object or a string")
    role = message.get("role") or message.get("type")
    return None if role is None else str(role)


def _text(message: Any, blocks: list[Block]) -> str:
    """The message's text; its image and file blocks are added to ``blocks``."""
    if isinstance(message, str):
        return message
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidInput("a message's content must be text or a list of content blocks")
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict) and block.get("type") in ("image", "image_url", "file"):
            blocks.append(_block(block))
        else:
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            raise Refused(
                f"content blocks of type {kind!r} are not supported: send text, image or file"
            )
    return "".join(parts)


def _block(block: dict[str, Any]) -> Block:
    """An image or file content block (LangChain's v1 ``{"type": "image", "mimeType",
    "data"}``, its older ``source_type: "base64"`` form, OpenAI's ``image_url`` with a
    data: URL) as base64; a block by URL is refused: yuxi never fetches it."""
    kind = "file" if block["type"] == "file" else "image"
    mime = block.get("mimeType") or block.get("mime_type")
    data = block.get("data") or block.get("base64")
    url = block.get("url")
    if block["type"] == "image_url":
        image_url = block.get("image_url")
        url = image_url.get("url") if isinstance(image_url, dict) else image_url
    if data is None and isinstance(url, str) and url.startswith("data:"):
        header, _, data = url.partition(",")
        mime = header[5:].split(";", 1)[0] or mime
    if not isinstance(data, str) or not data:
        raise Refused(
            f"a {kind} block by URL or file id is not supported: send its bytes as base64 (data)"
        )
    metadata = block.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    name = metadata.get("filename") or metadata.get("name") or block.get("filename")
    return Block(kind, data, str(mime or "application/octet-stream"), name and str(name))


def settings_of(body: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """``config.configurable`` and ``context`` together, LangGraph's own keys left out;
    and the keys that came from ``config.configurable`` alone (open: LangGraph lets a
    program put its own keys there)."""
    config = body.get("config") or {}
    if not isinstance(config, dict):
        raise InvalidInput("config must be an object")
    configurable = config.get("configurable") or {}
    context = body.get("context") or {}
    if not isinstance(configurable, dict) or not isinstance(context, dict):
        raise InvalidInput("config.configurable and context must be objects")
    merged = {**configurable, **context}
    settings = {
        key: value
        for key, value in merged.items()
        if key not in _RESERVED and not key.startswith(("__", "langgraph_"))
    }
    return settings, set(settings) - set(context)


def per_run_fields(
    settings: dict[str, Any],
    configurable_keys: Sequence[str],
    open_keys: Set[str] = frozenset(),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The request fields the settings set, and the open ``config.configurable`` keys
    for the graph's config. Of the agent's configurable items only the model and the
    approval mode are per run (the others are 422); an unknown key is 422 in
    ``context`` and passes through from ``config.configurable`` (``open_keys``)."""
    fields: dict[str, Any] = {}
    passed: dict[str, Any] = {}
    known = set(configurable_keys) | set(_PER_RUN)
    for key, value in settings.items():
        if key not in known:
            if key in open_keys:
                passed[key] = value
                continue
            raise Refused(
                f"unknown context key {key!r}; the agent's items are:"
                f" {', '.join(sorted(known))} (a program's own keys go in config.configurable)"
            )
        if key not in _PER_RUN:
            raise Refused(
                f"{key!r} is an agent setting and cannot change per run; change it on the agent"
            )
        if value is not None and not isinstance(value, str):
            raise InvalidInput(f"{key} must be a string")
        fields[_PER_RUN[key]] = value or None
    if len(json.dumps(passed, default=str)) > _MAX_CONFIGURABLE_BYTES:
        raise InvalidInput(
            f"config.configurable's own keys take at most {_MAX_CONFIGURABLE_BYTES} bytes of JSON"
        )
    return fields, passed
