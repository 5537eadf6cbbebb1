"""``ask_user``: the agent asks the user a question; the run is interrupted until the
answer comes back as the resume value."""

from __future__ import annotations

import json

from langchain_core.tools import tool
from langgraph.types import interrupt


@tool(parse_docstring=True)
def ask_user(question: str) -> str:
    """Ask the user a question and wait for the answer.

    Use only when you cannot continue without information from the user.

    Args:
        question: The question, phrased for the user.
    """
    answer = interrupt({"type": "question", "question": question})
    if isinstance(answer, str):
        return answer
    return json.dumps(answer, ensure_ascii=False, default=str)
