"""docs/agents.md shows the example agent package as it is: every block marked
``<!-- example-agent PATH -->`` is the whole of that file of the repository, which
tests/integration/test_agent_package.py installs and runs."""

from __future__ import annotations

import pytest

from tests.docs.conftest import ROOT
from tests.docs.markdown import CodeBlock, read_blocks

DOC = ROOT / "docs" / "agents.md"
MARKER = "example-agent"
EXAMPLE = "tests/fixtures/example_agent"


def _blocks() -> list[CodeBlock]:
    return [b for b in read_blocks(DOC, frozenset({MARKER})) if b.marker is not None]


def test_the_doc_shows_every_file_of_the_example() -> None:
    shown = {block.marker.body for block in _blocks() if block.marker is not None}
    files = {
        str(path.relative_to(ROOT))
        for path in (ROOT / EXAMPLE).rglob("*")
        if path.is_file() and path.suffix in {".py", ".toml"} and "__pycache__" not in path.parts
    }
    assert shown == files


@pytest.mark.parametrize("block", _blocks(), ids=lambda b: b.marker.body if b.marker else "")
def test_a_block_is_its_file(block: CodeBlock) -> None:
    assert block.marker is not None
    assert block.text == (ROOT / block.marker.body).read_text(), (
        f"docs/agents.md:{block.line} differs from {block.marker.body}"
    )
