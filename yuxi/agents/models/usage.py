"""How a run learns what its model calls spent, at the cost of the model calls only.

Every model yuxi builds carries ``USAGE_RELAY`` as its own callback: it is called when a
call of that model ends (a summarisation call through the same model too) and hands the
result to the collector of the run being executed, found in ``current_usage`` (set by
the worker around the graph). A callback in the graph's config instead would be called
for every node and middleware step of every run.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Protocol

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult

current_usage: ContextVar[BaseCallbackHandler | None] = ContextVar("yuxi_usage", default=None)


class ModelCallGate(Protocol):
    """What may refuse an agent's next model call (the run's budget); it raises to
    refuse."""

    async def before_model_call(self) -> None: ...


current_call_gate: ContextVar[ModelCallGate | None] = ContextVar("yuxi_call_gate", default=None)
"""The gate of the run being executed (set by the worker), asked before each of the
agent's model calls; None outside a run or when no budget applies."""


class UsageRelay(BaseCallbackHandler):
    """Passes each model call's end to ``current_usage`` (nothing outside a run)."""

    # run in the caller's task, where current_usage is set, never in a thread pool
    run_inline = True

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        sink = current_usage.get()
        if sink is not None:
            sink.on_llm_end(response, **kwargs)


USAGE_RELAY = UsageRelay()
