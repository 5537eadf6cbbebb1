"""The memory edits (append, replace a section) and when the tools are mounted."""

from __future__ import annotations

import pytest

from yuxi.agents.chatbot import ChatBotContext
from yuxi.agents.graph import build_system_prompt
from yuxi.agents.memory import (
    MemoryRefused,
    append_text,
    memory_tools_mounted,
    replace_section,
)
from yuxi.agents.subagent import SubAgentContext


def test_append_adds_a_paragraph() -> None:
    assert append_text("", "likes tea") == "likes tea\n"
    assert append_text("# Notes\n", "likes tea") == "# Notes\n\nlikes tea\n"
    assert append_text("a\n\n\n", "\nb\n") == "a\n\nb\n"
    with pytest.raises(MemoryRefused, match="empty"):
        append_text("a", " \n ")


MEMORY = """# Memory

## Preferences
- tea
- short answers

### Detail
kept with its section

## Projects
yuxi
"""


def test_a_section_is_replaced_up_to_the_next_heading_of_its_level() -> None:
    assert replace_section(MEMORY, "Preferences", "- coffee") == (
        "# Memory\n\n## Preferences\n\n- coffee\n\n## Projects\nyuxi\n"
    )
    assert replace_section(MEMORY, "## Projects", "yuxi, pgmq") == (
        MEMORY.removesuffix("yuxi\n") + "\nyuxi, pgmq\n"
    )
    # a deeper section ends at the next heading of its level or higher
    assert replace_section(MEMORY, "### Detail", "new") == MEMORY.replace(
        "### Detail\nkept with its section\n\n", "### Detail\n\nnew\n\n"
    )


def test_a_missing_section_is_appended() -> None:
    assert replace_section(MEMORY, "Pets", "a cat") == MEMORY + "\n## Pets\n\na cat\n"
    assert replace_section("", "Pets", "a cat") == "## Pets\n\na cat\n"
    # the same title at another level is another section
    assert replace_section(MEMORY, "# Preferences", "x").endswith("\n\n# Preferences\n\nx\n")


def test_headings_inside_code_fences_do_not_count() -> None:
    text = "## Code\n```\n## Not a heading\n```\n\n## After\nz\n"
    assert replace_section(text, "Code", "none") == "## Code\n\nnone\n\n## After\nz\n"
    assert replace_section(text, "Not a heading", "x").endswith("\n\n## Not a heading\n\nx\n")


@pytest.mark.parametrize("heading", ["", "  ", "##", "a\nb"])
def test_a_heading_is_one_non_empty_line(heading: str) -> None:
    with pytest.raises(MemoryRefused):
        replace_section(MEMORY, heading, "x")


def test_the_tools_need_memory_text_enable_memory_and_a_main_agent() -> None:
    assert memory_tools_mounted(ChatBotContext(enable_memory=True, memory="notes"))
    assert not memory_tools_mounted(ChatBotContext(enable_memory=True, memory=""))
    assert not memory_tools_mounted(ChatBotContext(enable_memory=False, memory="notes"))
    assert not memory_tools_mounted(SubAgentContext(enable_memory=True, memory="notes"))


def test_a_subagent_never_sees_the_users_memory() -> None:
    main = build_system_prompt(ChatBotContext(system_prompt="P", enable_memory=True, memory="M"))
    assert main.startswith("P\n\nThe user keeps these notes (agents/MEMORY.md) as reference;")
    assert "\nM\n\nYou may keep these notes up to date with memory_read" in main
    child = build_system_prompt(SubAgentContext(system_prompt="P", enable_memory=True, memory="M"))
    assert child == "P"
