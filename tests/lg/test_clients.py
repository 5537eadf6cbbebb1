"""What unmodified LangGraph clients send: agent-chat-ui's bodies (``stream_subgraphs``,
``input: {}`` with a command, a tool message closing an interrupted call, image and
file blocks), RemoteGraph's ``Command(resume=…)``, the SDKs' reconnect path, Studio's
stream modes, and the keep-alive of a long wait; against a real server and worker."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import httpx
import pytest
from langgraph.pregel.remote import RemoteGraph
from langgraph.types import Command
from langgraph_sdk.errors import UnprocessableEntityError

from tests.lg.conftest import Api, Clients
from yuxi.agents.base import BaseAgent
from yuxi.agents.context import BaseContext
from yuxi.agents.registry import register_backend, unregister_backend

pytestmark = pytest.mark.asyncio(loop_scope="module")

SSE_HEARTBEAT_SECONDS = 0.3  # a wait's keep-alive newlines come this often

# a 1×1 PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def last_text(values: dict[str, Any]) -> str:
    return str(values["messages"][-1]["content"])


def lg(api: Api, token_of: str = "alice") -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{api.base_url}{api.settings.lg_prefix}",
        headers={"x-api-key": api.tokens[token_of]},
        timeout=30.0,
    )


async def test_agent_chat_ui_message_body_streams(sdk: Clients, api: Api, worker: None) -> None:
    """The body useStream sends for every message: stream_subgraphs, stream_resumable,
    an absent context; the headers name the run relative to the base URL."""
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    body = {
        "assistant_id": "chatbot",
        "input": {
            "messages": [
                {"id": "m1", "type": "human", "content": [{"type": "text", "text": "hello"}]}
            ]
        },
        "stream_mode": ["values"],
        "stream_subgraphs": True,
        "stream_resumable": True,
        "on_disconnect": "continue",
        "config": {"configurable": {}},
    }
    async with (
        lg(api) as client,
        client.stream("POST", f"/threads/{tid}/runs/stream", json=body) as response,
    ):
        assert response.status_code == 200
        text = "".join([chunk async for chunk in response.aiter_text()])
        location = response.headers["location"]
        content_location = response.headers["content-location"]
    run_id = content_location.rsplit("/", 1)[-1]
    assert content_location == f"/threads/{tid}/runs/{run_id}"
    assert location == f"/threads/{tid}/runs/{run_id}/stream"
    assert "echo: hello" in text and "event: end" in text
    # the reconnect path the SDKs build: base URL + Location
    async with (
        lg(api) as client,
        client.stream("GET", location, headers={"Last-Event-ID": "1"}) as again,
    ):
        assert again.status_code == 200
        replay = "".join([chunk async for chunk in again.aiter_text()])
    assert "echo: hello" in replay and "event: metadata" not in replay  # after id 1 only


async def test_resume_with_empty_input_and_a_command(sdk: Clients, api: Api, worker: None) -> None:
    """agent-chat-ui answers an interrupt with submit({}, {command: {resume}})."""
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    values = await sdk.alice.runs.wait(tid, "chatbot", input=said("/ask what colour?"))
    assert values["__interrupt__"][0]["value"]["question"] == "what colour?"
    parts = [
        part
        async for part in sdk.alice.runs.stream(
            tid, "chatbot", input={}, command={"resume": "blue"}, stream_subgraphs=True
        )
    ]
    values = [p.data for p in parts if p.event == "values"][-1]
    assert last_text(values) == "you answered: blue"


async def test_a_tool_message_alone_answers_the_interrupted_call(
    sdk: Clients, worker: None
) -> None:
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    values = await sdk.alice.runs.wait(tid, "chatbot", input=said("/ask what colour?"))
    call = values["messages"][-1]["tool_calls"][0]
    answer = {"type": "tool", "tool_call_id": call["id"], "name": call["name"], "content": "green"}
    values = await sdk.alice.runs.wait(tid, "chatbot", input={"messages": [answer]})
    assert last_text(values) == "you answered: green"


async def test_new_input_supersedes_an_interrupt(sdk: Clients, worker: None) -> None:
    """agent-chat-ui closes the pending call with a synthetic tool message ahead of the
    user's next message: the interrupted run is cancelled and the message runs."""
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    values = await sdk.alice.runs.wait(tid, "chatbot", input=said("/ask what colour?"))
    call = values["messages"][-1]["tool_calls"][0]
    interrupted = (await sdk.alice.runs.list(tid))[0]
    closing = {
        "type": "tool",
        "id": "do-not-render-1",
        "tool_call_id": call["id"],
        "name": call["name"],
        "content": "Successfully handled tool call.",
    }
    human = {"type": "human", "id": "m2", "content": [{"type": "text", "text": "never mind"}]}
    values = await sdk.alice.runs.wait(tid, "chatbot", input={"messages": [closing, human]})
    assert last_text(values) == "echo: never mind"
    runs = {r["run_id"]: r["status"] for r in await sdk.alice.runs.list(tid)}
    assert runs[interrupted["run_id"]] == "interrupted"  # LangGraph's word for cancelled
    assert (await sdk.alice.threads.get(tid))["status"] == "idle"


async def test_remote_graph_interrupt_and_resume(sdk: Clients, api: Api, worker: None) -> None:
    """RemoteGraph sends Command(resume=…) as {"resume": …, "goto": [], …}."""
    remote = RemoteGraph("chatbot", client=sdk.alice)
    thread = await sdk.alice.threads.create()
    config = {"configurable": {"thread_id": thread["thread_id"]}}
    first = await remote.ainvoke(said("/ask your name?"), config)
    assert first["__interrupt__"][0]["value"]["question"] == "your name?"
    answered = await remote.ainvoke(Command(resume="yuxi"), config)
    assert answered["messages"][-1]["content"] == "you answered: yuxi"
    parts = [part async for part in remote.astream(said("again"), config, subgraphs=True)]
    assert parts and parts[-1][0] == ()  # (namespace, chunk): the root graph's own


async def test_older_agent_inbox_answers_a_tool_approval(sdk: Clients, worker: None) -> None:
    """Both interrupt shapes LangGraph UIs render are shown, and both answers taken."""
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    ask = {"tool_approval_mode": "ask"}
    tool = said('/tool calculator {"expression": "6*7"}')
    values = await sdk.alice.runs.wait(tid, "chatbot", input=tool, context=ask)
    shown = values["__interrupt__"][0]["value"]
    assert shown["action_requests"][0]["name"] == "calculator"  # langchain's HITL shape
    assert shown["action_request"] == {"action": "calculator", "args": {"expression": "6*7"}}
    assert shown["config"] == {
        "allow_accept": True,
        "allow_ignore": True,
        "allow_respond": True,
        "allow_edit": False,
    }
    values = await sdk.alice.runs.wait(
        tid, "chatbot", command={"resume": [{"type": "accept", "args": None}]}
    )
    assert last_text(values) == "tool calculator returned: 42"
    # a response rejects the call with the text the model reads
    await sdk.alice.runs.wait(tid, "chatbot", input=tool, context=ask)
    values = await sdk.alice.runs.wait(
        tid, "chatbot", command={"resume": {"type": "response", "args": "not now"}}
    )
    rejected = [m for m in values["messages"] if m["type"] == "tool"][-1]
    assert "not now" in rejected["content"]


@pytest.mark.parametrize(
    "answer",
    [
        [{"type": "response", "args": "blue"}],  # the older agent inbox
        {"decisions": [{"type": "respond", "message": "blue"}]},  # a HITL UI's reply
        "blue",  # the value itself
    ],
)
async def test_a_question_is_answered_in_every_ui_shape(
    sdk: Clients, worker: None, answer: Any
) -> None:
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    values = await sdk.alice.runs.wait(tid, "chatbot", input=said("/ask what colour?"))
    shown = values["__interrupt__"][0]["value"]
    assert shown["question"] == "what colour?"
    assert shown["action_request"] == {"action": "ask_user", "args": {"question": "what colour?"}}
    assert shown["config"]["allow_respond"] and not shown["config"]["allow_accept"]
    values = await sdk.alice.runs.wait(tid, "chatbot", command={"resume": answer})
    assert last_text(values) == "you answered: blue"


async def test_studio_stream_modes(sdk: Clients, worker: None) -> None:
    thread = await sdk.alice.threads.create()
    parts = [
        (p.event, p.data)
        async for p in sdk.alice.runs.stream(
            thread["thread_id"],
            "chatbot",
            input=said('/tool calculator {"expression": "6*7"}'),
            stream_mode=["tasks", "checkpoints", "debug", "events"],
        )
    ]
    tasks = [data for event, data in parts if event == "tasks"]
    started = [t["name"] for t in tasks if "triggers" in t]
    ended = [t["name"] for t in tasks if "result" in t]
    assert started == ended == ["model", "tools", "model"]
    assert tasks[-1]["result"]["messages"][0]["content"] == "tool calculator returned: 42"
    checkpoints = [data for event, data in parts if event == "checkpoints"]
    assert [c["metadata"]["step"] for c in checkpoints] == [1, 2, 3]
    assert last_text(checkpoints[-1]["values"]) == "tool calculator returned: 42"
    debug = [data["type"] for event, data in parts if event == "debug"]
    assert debug == ["task", "task_result", "checkpoint"] * 3
    events = [data["event"] for event, data in parts if event == "events"]
    assert events[0] == "on_chain_start" and events[-1] == "on_chain_end"
    assert "on_chat_model_stream" in events
    assert {"values", "updates", "messages"}.isdisjoint(e for e, _ in parts)


async def test_a_long_wait_sends_headers_and_keep_alive_at_once(
    sdk: Clients, api: Api, worker: None
) -> None:
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    body = {"assistant_id": "chatbot", "input": said("/sleep 1.5")}
    started = time.monotonic()
    async with (
        lg(api) as client,
        client.stream("POST", f"/threads/{tid}/runs/wait", json=body) as response,
    ):
        headers_after = time.monotonic() - started
        assert response.status_code == 200
        assert response.headers["content-location"].startswith(f"/threads/{tid}/runs/")
        raw = b"".join([chunk async for chunk in response.aiter_bytes()])
    assert headers_after < 1.0
    assert raw.startswith(b"\n")  # keep-alive while the run went on
    values = httpx.Response(200, content=raw).json()
    assert values["messages"][-1]["content"].startswith("slept")
    # join keeps the wait alive the same way
    run = await sdk.alice.runs.create(tid, "chatbot", input=said("/sleep 1"))
    joined = await sdk.alice.runs.join(tid, run["run_id"])
    assert joined["messages"][-1]["content"].startswith("slept")


async def test_image_and_file_blocks_become_attachments(
    sdk: Clients, api: Api, worker: None
) -> None:
    """agent-chat-ui's upload blocks: an image (LangChain's v1 block) and a PDF."""
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    image = {
        "type": "image",
        "mimeType": "image/png",
        "data": base64.b64encode(PNG).decode(),
        "metadata": {"name": "dot.png"},
    }
    pdf = {
        "type": "file",
        "mimeType": "application/pdf",
        "data": base64.b64encode(b"%PDF-1.4 x").decode(),
        "metadata": {"filename": "notes.pdf"},
    }
    message = {"type": "human", "content": [{"type": "text", "text": "look"}, image, pdf]}
    values = await sdk.alice.runs.wait(tid, "chatbot", input={"messages": [message]})
    assert last_text(values) == "echo: look"
    listed = await api.clients["alice"].get(f"/api/chat/thread/{tid}/attachments")
    assert listed.status_code == 200, listed.text
    names = sorted(a["filename"] for a in listed.json())
    assert names == ["dot.png", "notes.pdf"]
    referred = await api.sql(
        "SELECT jsonb_array_length(metadata -> 'attachments') FROM yuxi.messages"
        " WHERE thread_id = %s AND role = 'user'",
        tid,
    )
    assert referred == [(2,)]


@pytest.mark.parametrize(
    "block",
    [
        {"type": "image", "url": "http://169.254.169.254/latest/meta-data"},
        {
            "type": "image",
            "mimeType": "image/png",
            "data": base64.b64encode(b"not an image").decode(),
        },
        {"type": "audio", "data": "AAAA"},
    ],
)
async def test_unusable_blocks_are_refused_and_nothing_stays(
    sdk: Clients, api: Api, block: dict[str, Any]
) -> None:
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    message = {"type": "human", "content": [{"type": "text", "text": "x"}, block]}
    async with lg(api) as client:
        response = await client.post(
            f"/threads/{tid}/runs",
            json={"assistant_id": "chatbot", "input": {"messages": [message]}},
        )
    assert response.status_code in (400, 422), response.text
    assert await sdk.alice.runs.list(tid) == []


async def test_routes_yuxi_lacks_are_unsupported_not_404(api: Api) -> None:
    async with lg(api) as client:
        for method, path in [("GET", "/no/such/route"), ("PUT", "/info")]:
            response = await client.request(method, path)
            assert response.status_code == 422, (method, path, response.text)
            assert response.json()["error"]["code"] == "unsupported"
        # an object that is not there is still a 404
        missing = await client.get("/threads/00000000-0000-4000-8000-000000000000")
        assert missing.status_code == 404


async def test_concurrent_supersedes_leave_one_run_per_message(sdk: Clients, worker: None) -> None:
    """Two messages sent at once to an interrupted thread: the interrupt is cancelled
    once and both messages run, one after the other."""
    thread = await sdk.alice.threads.create()
    tid = thread["thread_id"]
    await sdk.alice.runs.wait(tid, "chatbot", input=said("/ask what colour?"))
    runs = await asyncio.gather(
        *(sdk.alice.runs.create(tid, "chatbot", input=said(f"m{i}")) for i in range(2))
    )
    for run in runs:
        await sdk.alice.runs.join(tid, run["run_id"])
    statuses = sorted(r["status"] for r in await sdk.alice.runs.list(tid))
    assert statuses == ["interrupted", "success", "success"]


async def test_stateless_runs_on_threads_of_their_own(sdk: Clients, api: Api, worker: None) -> None:
    """RemoteGraph without a thread_id, runs.wait/stream/create with None: each runs on
    a new thread, deleted once it ended unless on_completion is keep."""
    remote = RemoteGraph("chatbot", client=sdk.alice)
    answered = await remote.ainvoke(said("no thread"))
    assert answered["messages"][-1]["content"] == "echo: no thread"
    parts = [p async for p in sdk.alice.runs.stream(None, "chatbot", input=said("streamed"))]
    values = [p.data for p in parts if p.event == "values"][-1]
    assert last_text(values) == "echo: streamed"
    async with lg(api) as client:
        waited = await client.post(
            "/runs/wait", json={"assistant_id": "chatbot", "input": said("w")}
        )
        assert waited.status_code == 200 and last_text(waited.json()) == "echo: w"
        tid = waited.headers["content-location"].split("/")[2]
        assert (await client.get(f"/threads/{tid}")).status_code == 404  # deleted at its end
        kept = await client.post(
            "/runs/wait",
            json={"assistant_id": "chatbot", "input": said("k"), "on_completion": "keep"},
        )
        kept_tid = kept.headers["content-location"].split("/")[2]
        assert (await client.get(f"/threads/{kept_tid}")).status_code == 200
        bad = await client.post(
            "/runs", json={"assistant_id": "chatbot", "input": said("x"), "on_completion": "later"}
        )
        assert bad.status_code == 400
    run = await sdk.alice.runs.create(None, "chatbot", input=said("background"))
    await sdk.alice.runs.join(run["thread_id"], run["run_id"])
    # a background run's thread is left to the maintenance sweep (the worker's own, every
    # few seconds, or this one, whichever comes first)
    await api.sql("SELECT yuxi.lg_temporary_sweep()")
    with pytest.raises(httpx.HTTPStatusError):
        await sdk.alice.threads.get(run["thread_id"])
    assert await api.sql(
        "SELECT count(*) FROM yuxi.lg_threads WHERE temporary AND NOT deleted"
    ) == [(0,)]


class ConfigurableProbe(BaseAgent):
    """Answers with what the graph's config["configurable"] holds of a client's keys."""

    backend_id = "lg_configurable_probe"

    async def get_graph(self, context: BaseContext, *, checkpointer: Any = None) -> Any:
        from langchain_core.messages import AIMessage
        from langchain_core.runnables import RunnableConfig
        from langgraph.graph import START, MessagesState, StateGraph

        def answer(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
            configurable = config["configurable"]
            seen = {k: configurable.get(k) for k in ("tenant", "user_id")}
            return {"messages": [AIMessage(f"saw {seen}")]}

        graph = StateGraph(MessagesState)
        graph.add_node("answer", answer)
        graph.add_edge(START, "answer")
        return graph.compile(checkpointer=checkpointer)


async def test_a_clients_own_configurable_keys_reach_the_graph(
    sdk: Clients, api: Api, worker: None
) -> None:
    register_backend(ConfigurableProbe)
    try:
        created = await api.admin.post(
            "/api/agents",
            json={"slug": "probe", "name": "Probe", "backend_id": ConfigurableProbe.backend_id},
        )
        assert created.status_code == 201, created.text
        thread = await sdk.alice.threads.create()
        tid = thread["thread_id"]
        own = {"tenant": "acme", "user_id": "u-1", "thread_id": "ignored"}
        values = await sdk.alice.runs.wait(
            tid, "probe", input=said("hi"), config={"configurable": own}
        )
        assert last_text(values) == "saw {'tenant': 'acme', 'user_id': 'u-1'}"
        ((payload, digest),) = await api.sql(
            "SELECT r.input_payload -> 'configurable', r.manifest ->> 'config_digest'"
            " FROM yuxi.agent_runs r WHERE r.thread_id = %s",
            tid,
        )
        assert payload == {"tenant": "acme", "user_id": "u-1"}  # LangGraph's own keys left out
        values = await sdk.alice.runs.wait(tid, "probe", input=said("again"))
        assert last_text(values) == "saw {'tenant': None, 'user_id': None}"
        digests = await api.sql(
            "SELECT DISTINCT manifest ->> 'config_digest' FROM yuxi.agent_runs"
            " WHERE thread_id = %s",
            tid,
        )
        assert len(digests) == 2 and (digest,) in digests
        # the same key as a context field is still refused: Context fields are declared
        with pytest.raises(UnprocessableEntityError):
            await sdk.alice.runs.create(tid, "probe", input=said("x"), context={"tenant": "acme"})
    finally:
        unregister_backend(ConfigurableProbe.backend_id)


async def test_many_runs_of_one_user_at_once_all_end(sdk: Clients, worker: None) -> None:
    """More of one user's runs at once than the event loop has executor threads: they
    share the user's workspace cache, whose lock they take in turns (none is stuck)."""
    threads = [(await sdk.alice.threads.create())["thread_id"] for _ in range(16)]
    waits = [sdk.alice.runs.wait(t, "chatbot", input=said(f"n{i}")) for i, t in enumerate(threads)]
    done = await asyncio.wait_for(asyncio.gather(*waits), timeout=90)
    assert sorted(last_text(v) for v in done) == sorted(f"echo: n{i}" for i in range(16))


async def test_join_answers_the_thread_as_its_own_run_left_it(sdk: Clients, worker: None) -> None:
    """Runs enqueued on one thread: each one's join is the thread after that run, not
    after a later run that has begun since (its input already in the checkpoint)."""
    thread = (await sdk.alice.threads.create())["thread_id"]
    runs = [await sdk.alice.runs.create(thread, "chatbot", input=said(f"q{i}")) for i in range(8)]
    for i, run in enumerate(runs):
        values = await sdk.alice.runs.join(thread, run["run_id"])
        assert last_text(values) == f"echo: q{i}"
        assert len(values["messages"]) == 2 * (i + 1)


async def test_a_subagent_streams_as_a_subgraph(sdk: Clients, api: Api, worker: None) -> None:
    created = await api.admin.post(
        "/api/agents",
        json={
            "slug": "helper",
            "name": "Helper",
            "backend_id": "subagent",
            "is_subagent": True,
            "config": {"context": {"model": "builtin:scripted"}},
        },
    )
    assert created.status_code == 201, created.text
    task = said("/tool task " + json.dumps({"subagent": "helper", "description": "hi there"}))
    modes = ["updates", "messages-tuple"]
    thread = (await sdk.alice.threads.create())["thread_id"]
    parts = [
        (p.event, p.data)
        async for p in sdk.alice.runs.stream(
            thread, "chatbot", input=task, stream_mode=modes, stream_subgraphs=True
        )
    ]
    nested = [(e, d) for e, d in parts if "|" in e]
    namespaces = {e.split("|", 1)[1] for e, _ in nested}
    (child,) = await api.sql(
        "SELECT run_id FROM yuxi.agent_runs WHERE thread_id = %s AND run_type = 'subagent'",
        thread,
    )
    assert namespaces == {f"tools:{child[0]}"}
    text = "".join(d[0]["content"] for e, d in nested if e.startswith("messages|"))
    assert text == "echo: hi there"
    assert any(e.startswith("updates|") for e, _ in nested)
    # the parent's own parts come around it, in order, and its answer after
    names = [e for e, _ in parts]
    first_nested = names.index(next(e for e in names if "|" in e))
    assert "updates" in names[:first_nested]  # the task call
    final = [d for e, d in parts if e == "updates"][-1]
    assert final["model"]["messages"][0]["content"] == "tool task returned: echo: hi there"
    # without stream_subgraphs the subagent's run is not in the stream
    again = (await sdk.alice.threads.create())["thread_id"]
    plain = [
        p.event
        async for p in sdk.alice.runs.stream(again, "chatbot", input=task, stream_mode=modes)
    ]
    assert not any("|" in e for e in plain)
