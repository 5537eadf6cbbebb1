"""A graph that stops for a person's approval (``interrupt``) and carries on with their
answer (``Command(resume=...)``)."""

from __future__ import annotations

import os

from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import interrupt


def draft(state: MessagesState) -> dict:
    topic = state["messages"][-1].content
    return {"messages": [{"role": "assistant", "content": f"Draft: {topic}"}]}


def review(state: MessagesState) -> dict:
    text = state["messages"][-1].content
    answer = interrupt({"question": f"Publish {text!r}? (yes/no)", "draft": text})
    signature = os.environ.get("APPROVAL_SIGNATURE", "")
    if str(answer).strip().lower() == "yes":
        reply = f"Published: {text} {signature}".strip()
    else:
        reply = f"Discarded ({answer})"
    return {"messages": [{"role": "assistant", "content": reply}]}


graph = (
    StateGraph(MessagesState)
    .add_node(draft)
    .add_node(review)
    .add_edge(START, "draft")
    .add_edge("draft", "review")
    .compile()
)
