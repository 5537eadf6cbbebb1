"""What a run learns from its model calls, at the cost of the model calls only.

Every model yuxi builds carries ``MODEL_RELAY`` as its own callback. It hands each call's
end to the usage collector of the run being executed (``services().usage``, a summarisation
call through the same model too) and the call's text, token by token as the model
streams it or whole when it did not, to the run's event writer (``services().text``;
calls tagged ``nostream``, such as summaries, are left out). Both are lent by the worker
around the graph, and inside a run yuxi's models stream (``StreamsInRuns``). A callback
in the graph's config instead (LangGraph's ``stream_mode="messages"``) would be called
for every node and middleware step of every run.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, GenerationChunk, LLMResult
from langgraph.constants import TAG_NOSTREAM

from yuxi.agents.services import services


class ModelRelay(BaseCallbackHandler):
    """Passes each model call's text and end to the run being executed (nothing outside
    a run)."""

    # run in the caller's task, where the run's context variables are set, never in a
    # thread pool
    run_inline = True

    def __init__(self) -> None:
        # the calls (LangChain run ids) whose text was streamed: their whole reply at
        # the end is not sent again
        self._streamed: set[UUID] = set()

    def on_llm_new_token(
        self,
        token: str | list[str | dict[str, Any]],
        *,
        chunk: GenerationChunk | ChatGenerationChunk | None = None,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        sink = services().text
        if sink is None or not isinstance(chunk, ChatGenerationChunk):
            return
        if tags and TAG_NOSTREAM in tags:
            return
        text = str(chunk.message.text)  # the content's text, a plain str (as graph_io.text_of)
        if text:
            self._streamed.add(run_id)
            sink.message_chunk(chunk.message.id, text)

    def on_llm_end(
        self, response: LLMResult, *, run_id: UUID, tags: list[str] | None = None, **kwargs: Any
    ) -> None:
        usage = services().usage
        if usage is not None:
            usage.on_llm_end(response, run_id=run_id, tags=tags, **kwargs)
        if run_id in self._streamed:
            self._streamed.discard(run_id)
            return
        sink = services().text
        if sink is None or (tags and TAG_NOSTREAM in tags):
            return
        if response.generations and response.generations[0]:
            generation = response.generations[0][0]
            if isinstance(generation, ChatGeneration):
                text = str(generation.message.text)
                if text:
                    sink.message_chunk(generation.message.id, text)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._streamed.discard(run_id)


MODEL_RELAY = ModelRelay()


class StreamsInRuns:
    """Mixin of yuxi's chat models: a call made inside a run streams (where the model
    and its capabilities allow), so that its text reaches the run's events as it comes;
    outside a run a call streams only when asked to."""

    def _should_stream(self, *, async_api: bool, run_manager: Any = None, **kwargs: Any) -> bool:
        if services().text is not None and "stream" not in kwargs:
            kwargs["stream"] = True
        return super()._should_stream(  # type: ignore[misc,no-any-return]
            async_api=async_api, run_manager=run_manager, **kwargs
        )
