"""Reading a LangGraph project's langgraph.json (no database, no graph imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from yuxi.agents.graphs import GraphLoadError, GraphSpec
from yuxi.agents.project import ProjectError, parse_dotenv, read_project


def test_dotenv_lines() -> None:
    text = "# comment\nexport A=1\nB = 'two words'\nC=\"x=y\"\nD=plain # note\n\nnot a line\n"
    assert parse_dotenv(text) == {"A": "1", "B": "two words", "C": "x=y", "D": "plain"}


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ([], "must hold a JSON object"),
        ({"graphs": {}}, 'needs "graphs"'),
        ({"graphs": {"a": 3}}, "graph 'a'"),
        ({"graphs": {"a": "./a.py:g"}, "dependencies": "."}, '"dependencies"'),
        ({"graphs": {"a": "./a.py:g"}, "env": 1}, '"env"'),
    ],
)
def test_a_bad_langgraph_json_is_named(tmp_path: Path, config: object, problem: str) -> None:
    (tmp_path / "langgraph.json").write_text(json.dumps(config))
    with pytest.raises(ProjectError, match=problem):
        read_project(tmp_path)


def test_up_refuses_a_project_without_langgraph_json(tmp_path: Path) -> None:
    # before it starts any database
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from yuxi.cli import main; main()",
            "up",
            "--graphs",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "YUXI_HOME": str(tmp_path / "home")},
    )
    assert result.returncode == 1, result.stderr
    assert "no langgraph.json at" in result.stderr
    assert not (tmp_path / "home").exists()


def test_a_load_error_names_no_host_directory(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(f"open({str(tmp_path / 'missing.txt')!r})\n")
    inside = GraphSpec("inside", "./agent.py:graph", tmp_path)
    outside = GraphSpec("outside", f"{tmp_path}/gone.py:graph", tmp_path / "elsewhere")
    for spec, why in ((inside, "FileNotFoundError"), (outside, "no file gone.py")):
        with pytest.raises(GraphLoadError, match=why) as failed:
            spec.load()
        assert str(tmp_path) not in str(failed.value)
        with pytest.raises(GraphLoadError) as again:  # imported once: the same error
            spec.load()
        assert str(again.value) == str(failed.value)


def test_a_module_that_exits_at_import_fails_its_graph_only(tmp_path: Path) -> None:
    (tmp_path / "leaves.py").write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(GraphLoadError, match="SystemExit: 3"):
        GraphSpec("leaves", "./leaves.py:graph", tmp_path).load()
