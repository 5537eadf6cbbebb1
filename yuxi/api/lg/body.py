"""What a LangGraph run body asks for, in yuxi's terms, or 422 for what yuxi refuses."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from yuxi.api.lg.errors import Refused
from yuxi.queue.errors import InvalidInput

STREAM_MODES = ("values", "updates", "messages", "messages-tuple", "custom")
STRATEGIES = ("enqueue", "reject", "interrupt")
# configurable keys LangGraph itself puts in a config, not the agent's
_RESERVED = ("thread_id", "checkpoint_id", "checkpoint_ns", "run_id", "assistant_id", "graph_id")
# the agent's configurable items a run may set, and the request field each becomes
_PER_RUN = {"model": "model_spec", "tool_approval_mode": "tool_approval_mode"}
_DECISIONS = ("approve", "reject")


@dataclass(frozen=True)
class RunBody:
    """A run body: the text to submit or the resume value, and how."""

    assistant_id: str
    query: str | None
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
    query, resume, has_resume = _input_of(body)
    return RunBody(
        assistant_id=assistant,
        query=query,
        resume=resume,
        has_resume=has_resume,
        strategy=strategy,
        stream_modes=stream_modes(body.get("stream_mode")),
        metadata=metadata,
        model_spec=None,
        tool_approval_mode=None,
        checkpoint_id=_checkpoint_id(body),
        if_not_exists=if_not_exists,
        extra=settings_of(body),
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
    if body.get("stream_subgraphs"):
        raise Refused("stream_subgraphs is not supported: subagent runs stream on their own")


def _checkpoint_id(body: dict[str, Any]) -> str | None:
    checkpoint = body.get("checkpoint")
    if isinstance(checkpoint, dict) and checkpoint.get("checkpoint_id"):
        return str(checkpoint["checkpoint_id"])
    if body.get("checkpoint_id"):
        return str(body["checkpoint_id"])
    return None


def _input_of(body: dict[str, Any]) -> tuple[str | None, Any, bool]:
    command = body.get("command")
    run_input = body.get("input")
    if command is not None:
        if not isinstance(command, dict):
            raise InvalidInput("command must be an object")
        for key in ("goto", "update"):
            if command.get(key) is not None:
                raise Refused(
                    f"command.{key} is not supported: a yuxi run only resumes the latest"
                    " interrupted run (command.resume)"
                )
        if "resume" not in command:
            raise InvalidInput("command needs resume")
        if run_input is not None:
            raise InvalidInput("send input or command, not both")
        return None, _resume_value(command["resume"]), True
    if run_input is None:
        raise Refused("a run needs input.messages (a run without input is not supported)")
    return _query_of(run_input), None, False


def _resume_value(value: Any) -> Any:
    """A resume value as yuxi's resume takes it: a HITL decision list passes as it is
    when every decision is approve or reject; edit and respond-like decisions are
    refused."""
    if isinstance(value, dict) and "decisions" in value:
        decisions = value["decisions"]
        if not isinstance(decisions, list) or not decisions:
            raise InvalidInput("decisions must be a non-empty list")
        for decision in decisions:
            kind = decision.get("type") if isinstance(decision, dict) else None
            if kind not in _DECISIONS:
                raise Refused(
                    f"decision {kind!r} is not supported: yuxi's tool approval takes approve"
                    " or reject"
                )
        return {"decisions": decisions}
    return value


def _query_of(run_input: Any) -> str:
    if not isinstance(run_input, dict):
        raise Refused("input must be an object with messages")
    unknown = sorted(set(run_input) - {"messages"})
    if unknown:
        raise Refused(f"input keys {unknown} are not supported: a run's input is its messages")
    messages = run_input.get("messages")
    if isinstance(messages, (str, dict)):
        messages = [messages]
    if not isinstance(messages, list) or not messages:
        raise InvalidInput("input.messages must be a non-empty list")
    texts = [_human_text(m) for m in messages]
    return "\n\n".join(texts)


def _human_text(message: Any) -> str:
    if isinstance(message, str):
        return message
    if not isinstance(message, dict):
        raise InvalidInput("each input message must be an object or a string")
    role = message.get("role") or message.get("type")
    if role not in ("user", "human"):
        raise Refused(
            f"input messages of role {role!r} are not supported: a run's input is the"
            " user's message"
        )
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            else:
                raise Refused("only text content is supported in input messages")
        return "".join(parts)
    raise InvalidInput("a message's content must be text")


def settings_of(body: dict[str, Any]) -> dict[str, Any]:
    """``config.configurable`` and ``context`` together, LangGraph's own keys left out."""
    config = body.get("config") or {}
    if not isinstance(config, dict):
        raise InvalidInput("config must be an object")
    configurable = config.get("configurable") or {}
    context = body.get("context") or {}
    if not isinstance(configurable, dict) or not isinstance(context, dict):
        raise InvalidInput("config.configurable and context must be objects")
    merged = {**configurable, **context}
    return {
        key: value
        for key, value in merged.items()
        if key not in _RESERVED and not key.startswith(("__", "langgraph_"))
    }


def per_run_fields(settings: dict[str, Any], configurable_keys: Sequence[str]) -> dict[str, Any]:
    """The request fields the settings set: keys outside the agent's configurable items
    are unknown (422); of these, only the model and the approval mode are per run."""
    fields: dict[str, Any] = {}
    known = set(configurable_keys) | set(_PER_RUN)
    for key, value in settings.items():
        if key not in known:
            raise Refused(
                f"unknown configurable key {key!r}; the agent's items are:"
                f" {', '.join(sorted(known))}"
            )
        if key not in _PER_RUN:
            raise Refused(
                f"{key!r} is an agent setting and cannot change per run; change it on the agent"
            )
        if value is not None and not isinstance(value, str):
            raise InvalidInput(f"{key} must be a string")
        fields[_PER_RUN[key]] = value or None
    return fields
