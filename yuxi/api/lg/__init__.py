"""The LangGraph Platform-compatible API (docs/langgraph.md): the routes the official
``langgraph_sdk`` client calls, mapped onto yuxi's queue, event log and checkpoints.

These routes import nothing of LangGraph or LangChain: a LangGraph client sees JSON, and
only the checkpoints need LangGraph's checkpointer to be read (its deserialiser makes
LangChain messages and LangGraph interrupts). It is loaded with the first state read
(``AppState.checkpointer``), LangGraph's store with the first store call
(``AppState.store``) and an assistant's graph with its first drawing, so an API starts
without them (tests/integration/test_api_start.py)."""

from __future__ import annotations

from litestar import Router
from litestar.di import Provide

from yuxi.api.lg.assistants import (
    assistant_versions,
    count_assistants,
    create_assistant,
    delete_assistant,
    get_assistant,
    get_schemas,
    search_assistants,
    set_latest_version,
    update_assistant,
)
from yuxi.api.lg.auth import lg_caller
from yuxi.api.lg.crons import (
    count_crons,
    create_cron,
    create_thread_cron,
    delete_cron,
    search_crons,
    update_cron,
)
from yuxi.api.lg.drawing import assistant_graph, assistant_subgraphs, assistant_subgraphs_in
from yuxi.api.lg.errors import Refused, refused
from yuxi.api.lg.info import info
from yuxi.api.lg.run_admin import cancel_many, delete_run
from yuxi.api.lg.runs import (
    cancel_run,
    create_run,
    get_run,
    join_run,
    join_stream,
    list_runs,
    stateless_run,
    stateless_stream,
    stateless_wait,
    stream_new_run,
    wait_new_run,
)
from yuxi.api.lg.store import delete_item, get_item, list_namespaces, put_item, search_items
from yuxi.api.lg.thread_admin import (
    copy_thread,
    count_threads,
    join_thread_stream,
    prune_threads,
)
from yuxi.api.lg.thread_state import post_state, state_at_checkpoint, state_at_checkpoint_id
from yuxi.api.lg.threads import (
    create_thread,
    delete_thread,
    get_thread,
    patch_thread,
    search_threads,
    thread_history_get,
    thread_history_post,
    thread_state,
)


def lg_router(prefix: str) -> Router:
    """Every /lg route under ``prefix``; its ``user`` is the caller of ``x-api-key`` or
    a Bearer token."""
    return Router(
        path=prefix,
        route_handlers=[
            info,
            search_assistants,
            get_assistant,
            get_schemas,
            create_assistant,
            count_assistants,
            update_assistant,
            delete_assistant,
            assistant_versions,
            set_latest_version,
            assistant_graph,
            assistant_subgraphs,
            assistant_subgraphs_in,
            put_item,
            get_item,
            delete_item,
            search_items,
            list_namespaces,
            create_thread,
            search_threads,
            get_thread,
            patch_thread,
            delete_thread,
            thread_state,
            state_at_checkpoint,
            state_at_checkpoint_id,
            post_state,
            thread_history_get,
            thread_history_post,
            copy_thread,
            count_threads,
            prune_threads,
            join_thread_stream,
            create_run,
            stream_new_run,
            wait_new_run,
            list_runs,
            get_run,
            join_run,
            join_stream,
            cancel_run,
            delete_run,
            cancel_many,
            stateless_run,
            stateless_stream,
            stateless_wait,
            create_cron,
            create_thread_cron,
            search_crons,
            delete_cron,
            update_cron,
            count_crons,
        ],
        dependencies={"user": Provide(lg_caller)},
        exception_handlers={Refused: refused},
        security=[{"apiKey": []}, {"bearer": []}],
    )
